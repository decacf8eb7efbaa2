/* Backend registry: built-ins, run-time modules, dlopen'd plugins. */
#include "registry.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "genfence/engine.h"
#include "ref/ref.h"

typedef struct builtin {
    const char *name;
    const gf_backend_ops *(*get)(void); /* NULL: a module loaded at run time */
} builtin;

static const builtin k_builtins[] = {
    {"ref", gf_backend_ref},
    {"openblas", NULL},
    {"onednn", NULL},
};

const char *const *gf_registry_names(void)
{
    static const char *names[sizeof k_builtins / sizeof k_builtins[0] + 1];
    for (size_t i = 0; i < sizeof k_builtins / sizeof k_builtins[0]; i++)
        names[i] = k_builtins[i].name;
    return names;
}

const char *gf_registry_module_dir(void)
{
    /* $GENFENCE_MODULE_DIR, else the build tree's, else <exe>/../lib/genfence/backends
     * (an installed genfence) */
    static char installed[4096];
    const char *env = getenv("GENFENCE_MODULE_DIR");
    if (env && env[0])
        return env;
    struct stat sb;
    if (stat(GENFENCE_MODULE_DIR, &sb) == 0 && S_ISDIR(sb.st_mode))
        return GENFENCE_MODULE_DIR;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(installed, sizeof installed, "%.4000s/../lib/genfence/backends", exe);
            return installed;
        }
    }
    return GENFENCE_MODULE_DIR;
}

static gf_status open_shared(const char *path, const char *label, gf_backend_handle *h)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        return gf_error_set(GF_E_UNAVAILABLE, "%s: cannot load %s: %s", label, path, dlerror());
    dlerror();
    void *sym = dlsym(dl, GF_BACKEND_ENTRY_SYMBOL);
    if (!sym) {
        gf_status st = gf_error_set(GF_E_ABI, "%s: %s does not export %s()", label, path,
                                    GF_BACKEND_ENTRY_SYMBOL);
        dlclose(dl);
        return st;
    }
    gf_backend_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const gf_backend_ops *ops = entry();
    gf_status st = gf_backend_check_ops(ops);
    if (st != GF_OK) {
        gf_error_prefix(st, "%s: refused %s", label, path);
        dlclose(dl);
        return st;
    }
    h->ops = ops;
    h->dl = dl;
    snprintf(h->source, sizeof h->source, "%s", path);
    return GF_OK;
}

gf_status gf_registry_open(const char *name, gf_backend_handle *h)
{
    memset(h, 0, sizeof *h);
    size_t n = strlen(name);
    if (strchr(name, '/') || (n > 3 && !strcmp(name + n - 3, ".so")))
        return open_shared(name, "plugin", h);
    for (size_t i = 0; i < sizeof k_builtins / sizeof k_builtins[0]; i++) {
        if (strcmp(name, k_builtins[i].name))
            continue;
        if (k_builtins[i].get) {
            h->ops = k_builtins[i].get();
            snprintf(h->source, sizeof h->source, "built-in");
            return gf_backend_check_ops(h->ops);
        }
        char path[1024];
        snprintf(path, sizeof path, "%s/libgenfence_backend_%s.so", gf_registry_module_dir(), name);
        return open_shared(path, name, h);
    }
    return gf_error_set(GF_E_NOT_FOUND, "unknown backend '%s' (known: ref, openblas, onednn, or a plugin path)",
                        name);
}

void gf_registry_close(gf_backend_handle *h)
{
    if (!h)
        return;
    if (h->dl)
        dlclose(h->dl);
    memset(h, 0, sizeof *h);
}
