/* The backend registry: built-in backends by name, vendor backends as modules
 * (libgenfence_backend_NAME.so in the module directory), and out-of-tree
 * plugins by path (anything containing '/' or ending in ".so"). */
#ifndef GENFENCE_REGISTRY_H
#define GENFENCE_REGISTRY_H

#include <stddef.h>

#include "genfence/backend.h"

typedef struct gf_backend_handle {
    const gf_backend_ops *ops;
    void *dl;         /* dlopen handle for modules and plugins, else NULL */
    char source[512]; /* "built-in", or the path loaded */
    char *config;     /* the spec's text after the first ':', or NULL (owned) */
} gf_backend_handle;

/* Names genfence knows without a path, in display order (NULL-terminated):
 * ref, then the run-time modules the build declared (backends/CMakeLists.txt). */
const char *const *gf_registry_names(void);

/* 1 if the backend NAME runs only when asked for with a config (NAME:CONFIG;
 * exec: the protocol client's command line), so it is not in `genfence run`'s
 * default list (gf_backend_folder(NAME ON_REQUEST) in CMake). */
int gf_registry_on_request(const char *name);

/* Open a backend by spec: NAME, NAME:CONFIG, or a plugin path (anything with
 * '/' or ending in ".so", optionally :CONFIG). CONFIG is handed to the
 * backend as gf_backend_options.config (gf_registry_options). Checks the ABI
 * (gf_backend_check_ops). On failure *h is cleared and the message says why
 * (the loader's text); GF_E_NOT_FOUND for a name nobody declared. */
gf_status gf_registry_open(const char *spec, gf_backend_handle *h);

/* The options to hand h's backend: threads (>= 1) and h's config. */
gf_backend_options gf_registry_options(const gf_backend_handle *h, int32_t threads);
void gf_registry_close(gf_backend_handle *h); /* NULL-safe */

/* Directory searched for modules: $GENFENCE_MODULE_PATH (`genfence
 * --module-dir DIR` sets it), else $GENFENCE_MODULE_DIR (the older name),
 * else an installed genfence's
 * <exe>/../lib/genfence/backends when it exists, else the build tree's. */
const char *gf_registry_module_dir(void);
/* The same, with *origin (when not NULL) saying which rule chose it:
 * "GENFENCE_MODULE_PATH", "GENFENCE_MODULE_DIR", "installed with this
 * genfence", "the build tree". */
const char *gf_registry_module_dir_origin(const char **origin);

#endif
