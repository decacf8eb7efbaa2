/* The invariance a backend declares (invariance_decl.h). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "invariance_decl.h"
#include "registry.h"
#include "session.h"

static const char *const k_axis_name[] = {
#define GF_INV_AXIS_NAME(name, what) #name,
    GF_INV_AXIS_LIST(GF_INV_AXIS_NAME)
#undef GF_INV_AXIS_NAME
};
static const char *const k_axis_what[] = {
#define GF_INV_AXIS_WHAT(name, what) what,
    GF_INV_AXIS_LIST(GF_INV_AXIS_WHAT)
#undef GF_INV_AXIS_WHAT
};
static const char *const k_level_word[] = {
#define GF_INV_LEVEL_WORD(id, word, measured) word,
    GF_INV_LEVEL_LIST(GF_INV_LEVEL_WORD)
#undef GF_INV_LEVEL_WORD
};
static const char *const k_level_verdict[] = {
#define GF_INV_LEVEL_VERDICT(id, word, measured) measured,
    GF_INV_LEVEL_LIST(GF_INV_LEVEL_VERDICT)
#undef GF_INV_LEVEL_VERDICT
};

const char *gf_inv_axis_name(gf_inv_axis a) { return (unsigned)a < GF_INV_N_AXES ? k_axis_name[a] : "?"; }
const char *gf_inv_axis_what(gf_inv_axis a) { return (unsigned)a < GF_INV_N_AXES ? k_axis_what[a] : "?"; }
const char *gf_inv_level_word(gf_inv_level l) { return (unsigned)l < GF_INV_N_LEVELS ? k_level_word[l] : "?"; }
const char *gf_inv_level_verdict(gf_inv_level l) { return (unsigned)l < GF_INV_N_LEVELS ? k_level_verdict[l] : "?"; }

int gf_inv_axis_find(const char *name)
{
    for (int a = 0; a < GF_INV_N_AXES; a++)
        if (!strcmp(name, k_axis_name[a]))
            return a;
    return -1;
}

int gf_inv_decl_parse(const char *text, gf_inv_decl *d, char *err, size_t err_len)
{
    for (int a = 0; a < GF_INV_N_AXES; a++) {
        d->level[a] = GF_INV_LEVEL_GATED;
        d->said[a] = 0;
    }
    if (err_len)
        err[0] = '\0';
    if (!text)
        return 0;
    const char *p = text;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char entry[64];
        if (n == 0 || n >= sizeof entry) {
            snprintf(err, err_len, "invariance '%s': %s entry at offset %zu", text, n ? "an overlong" : "an empty",
                     (size_t)(p - text));
            return -1;
        }
        memcpy(entry, p, n);
        entry[n] = '\0';
        char *eq = strchr(entry, '=');
        if (!eq) {
            snprintf(err, err_len, "invariance '%s': entry '%s' is not AXIS=LEVEL", text, entry);
            return -1;
        }
        *eq = '\0';
        const char *lv = eq + 1;
        int level = -1;
        for (int l = 0; l < GF_INV_N_LEVELS; l++)
            if (!strcmp(lv, k_level_word[l]))
                level = l;
        int axis = strcmp(entry, "all") ? gf_inv_axis_find(entry) : GF_INV_N_AXES;
        if (axis < 0 || level < 0) {
            const int words = axis < 0 ? GF_INV_N_AXES : GF_INV_N_LEVELS;
            char known[160] = "";
            size_t kl = axis < 0 ? (size_t)snprintf(known, sizeof known, "all") : 0;
            for (int i = 0; i < words && kl < sizeof known; i++)
                kl += (size_t)snprintf(known + kl, sizeof known - kl, "%s%s", kl ? ", " : "",
                                       axis < 0 ? k_axis_name[i] : k_level_word[i]);
            snprintf(err, err_len, "invariance '%s': %s '%s' in entry '%s=%s' (%s: %s)", text,
                     axis < 0 ? "unknown axis" : "unknown level", axis < 0 ? entry : lv, entry, lv,
                     axis < 0 ? "axes" : "levels", known);
            return -1;
        }
        for (int a = 0; a < GF_INV_N_AXES; a++)
            if (axis == GF_INV_N_AXES || axis == a) {
                d->level[a] = (gf_inv_level)level;
                d->said[a] = 1;
            }
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

int gf_inv_declared(struct gf_session *ss, int32_t threads, gf_inv_decl *d, char *text, size_t cap, char *err,
                    size_t err_len)
{
    gf_backend_options bo = gf_registry_options(&ss->backend, threads);
    gf_backend_info bi;
    gf_backend_describe(ss->backend.ops, &bo, &bi);
    const char *t =
        bi.struct_size >= offsetof(gf_backend_info, invariance) + sizeof bi.invariance ? bi.invariance : NULL;
    snprintf(text, cap, "%s", t ? t : "");
    return gf_inv_decl_parse(t, d, err, err_len);
}
