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

#ifndef GENFENCE_BACKEND_MODULES
#define GENFENCE_BACKEND_MODULES ""
#endif
#ifndef GENFENCE_BACKEND_ON_REQUEST
#define GENFENCE_BACKEND_ON_REQUEST ""
#endif

enum { GF_REGISTRY_MAX = 32 };

/* ref (linked in), then the module names the build declared, comma-separated
 * in GENFENCE_BACKEND_MODULES (fed by gf_backend_folder() in CMake). */
const char *const *gf_registry_names(void)
{
    static char buf[sizeof GENFENCE_BACKEND_MODULES + 1];
    static const char *names[GF_REGISTRY_MAX + 1];
    if (names[0])
        return names;
    size_t n = 0;
    names[n++] = "ref";
    memcpy(buf, GENFENCE_BACKEND_MODULES, sizeof GENFENCE_BACKEND_MODULES);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < GF_REGISTRY_MAX; t = strtok_r(NULL, ",", &save))
        names[n++] = t;
    names[n] = NULL;
    return names;
}

int gf_registry_on_request(const char *name)
{
    /* GENFENCE_BACKEND_ON_REQUEST: comma-separated, from gf_backend_folder(NAME ON_REQUEST) */
    const char *list = GENFENCE_BACKEND_ON_REQUEST;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n))
            return 1;
        p += len + (e ? 1 : 0);
    }
    return 0;
}

static void known_list(char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (const char *const *n = gf_registry_names(); *n && used < len; n++) {
        int w = snprintf(out + used, len - used, "%s%s", used ? ", " : "", *n);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* Where the modules come from, and why there: $GENFENCE_MODULE_PATH (or
 * `genfence --module-dir`, which sets it), else $GENFENCE_MODULE_DIR (its
 * older name, kept as an alias), else an installed genfence's own
 * <exe>/../lib/genfence/backends when that folder exists, else the build
 * tree's. An installed binary never picks up a build tree's modules just
 * because that tree still exists. */
const char *gf_registry_module_dir_origin(const char **origin)
{
    static char installed[4096];
    static const char *const vars[] = {"GENFENCE_MODULE_PATH", "GENFENCE_MODULE_DIR"}; /* one directory each */
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *env = getenv(vars[i]);
        if (env && env[0]) {
            if (origin)
                *origin = vars[i];
            return env;
        }
    }
    struct stat sb;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(installed, sizeof installed, "%.4000s/../lib/genfence/backends", exe);
            if (stat(installed, &sb) == 0 && S_ISDIR(sb.st_mode)) {
                if (origin)
                    *origin = "installed with this genfence";
                return installed;
            }
        }
    }
    if (origin)
        *origin = "the build tree";
    return GENFENCE_MODULE_DIR;
}

const char *gf_registry_module_dir(void) { return gf_registry_module_dir_origin(NULL); }

static gf_status open_shared(const char *path, const char *label, gf_backend_handle *h)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        return gf_error_set(GF_E_UNAVAILABLE, "%s: cannot load %s: %s", label, path, dlerror());
    dlerror();
    void *sym = dlsym(dl, GF_BACKEND_ENTRY_SYMBOL);
    if (!sym) {
        gf_status st = gf_error_set(GF_E_ABI, "%s: %s does not export %s()", label, path, GF_BACKEND_ENTRY_SYMBOL);
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

/* Split spec into its name (copied to name, len bytes) and config (after the
 * first ':', NULL when none). */
static gf_status split_spec(const char *spec, char *name, size_t len, char **config_out)
{
    *config_out = NULL;
    const char *colon = strchr(spec, ':');
    size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
    if (n == 0)
        return gf_error_set(GF_E_INVALID_ARG, "backend spec '%s' has no name before ':'", spec);
    if (n >= len)
        return gf_error_set(GF_E_INVALID_ARG, "backend spec '%.64s...' is too long", spec);
    memcpy(name, spec, n);
    name[n] = '\0';
    if (colon) {
        *config_out = strdup(colon + 1);
        if (!*config_out)
            return gf_error_set(GF_E_NOMEM, "out of memory");
    }
    return GF_OK;
}

static gf_status open_named(const char *name, gf_backend_handle *h)
{
    size_t n = strlen(name);
    if (strchr(name, '/') || (n > 3 && !strcmp(name + n - 3, ".so")))
        return open_shared(name, "plugin", h);
    if (!strcmp(name, "ref")) {
        h->ops = gf_backend_ref();
        snprintf(h->source, sizeof h->source, "built-in");
        return gf_backend_check_ops(h->ops);
    }
    for (const char *const *k = gf_registry_names(); *k; k++) {
        if (strcmp(name, *k))
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/libgenfence_backend_%s.so", gf_registry_module_dir(), name);
        return open_shared(path, name, h);
    }
    char known[512];
    known_list(known, sizeof known);
    return gf_error_set(GF_E_NOT_FOUND, "unknown backend '%s' (known: %s, or a plugin path)", name, known);
}

gf_status gf_registry_open(const char *spec, gf_backend_handle *h)
{
    memset(h, 0, sizeof *h);
    char name[1024];
    char *config = NULL;
    gf_status st = split_spec(spec, name, sizeof name, &config);
    if (st == GF_OK)
        st = open_named(name, h);
    if (st != GF_OK) {
        free(config);
        gf_registry_close(h);
        return st;
    }
    h->config = config;
    return GF_OK;
}

gf_backend_options gf_registry_options(const gf_backend_handle *h, int32_t threads)
{
    gf_backend_options o = {
        .struct_size = sizeof o, .threads = threads > 0 ? threads : 1, .config = h ? h->config : NULL};
    return o;
}

void gf_registry_close(gf_backend_handle *h)
{
    if (!h)
        return;
    if (h->dl)
        dlclose(h->dl);
    free(h->config);
    memset(h, 0, sizeof *h);
}
