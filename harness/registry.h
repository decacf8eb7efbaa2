/* The backend registry: built-in backends by name, vendor backends as modules
 * (libgenfence_backend_NAME.so in the module directory), and out-of-tree
 * plugins by path (anything containing '/' or ending in ".so"). */
#ifndef GENFENCE_REGISTRY_H
#define GENFENCE_REGISTRY_H

#include <stddef.h>

#include "genfence/backend.h"

typedef struct gf_backend_handle {
    const gf_backend_ops *ops;
    void *dl;                  /* dlopen handle for modules and plugins, else NULL */
    char source[512];          /* "built-in", or the path loaded */
} gf_backend_handle;

/* Names genfence knows without a path, in display order (NULL-terminated). */
const char *const *gf_registry_names(void);

/* Open a backend by name or plugin path; checks the ABI (gf_backend_check_ops).
 * On failure *h is cleared and the message says why (the loader's text). */
gf_status gf_registry_open(const char *name_or_path, gf_backend_handle *h);
void gf_registry_close(gf_backend_handle *h);  /* NULL-safe */

/* Directory searched for modules: $GENFENCE_MODULE_DIR, else the build's. */
const char *gf_registry_module_dir(void);

#endif
