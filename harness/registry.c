/* Backend registry: built-ins, run-time modules, dlopen'd plugins. */
#include "registry.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    {"cuda", NULL},
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
    const char *env = getenv("GENFENCE_MODULE_DIR");
    return env && env[0] ? env : GENFENCE_MODULE_DIR;
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
    return gf_error_set(GF_E_NOT_FOUND, "unknown backend '%s' (known: ref, openblas, onednn, cuda, or a plugin path)",
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
