/* Internal to the case loader (case.c, case_schema.c, case_load.c). */
#ifndef GENFENCE_HARNESS_CASE_INTERNAL_H
#define GENFENCE_HARNESS_CASE_INTERNAL_H

#include "case.h"

/* Parse one YAML document into a node tree (case.c, libyaml); NULL with
 * errors recorded in ctx. */
gf_ynode *gf_yaml_parse(gf_cctx *ctx, const char *text, size_t len);
/* A deep copy of a node tree, read flags cleared (a models: list's copies, load.c); NULL on OOM. */
gf_ynode *gf_ynode_clone(const gf_ynode *src);
/* "FILE:LINE:COL: message" into ctx. */
void gf_y_error_at(gf_cctx *ctx, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
