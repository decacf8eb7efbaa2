/* The verdict table and the one status -> verdict mapping. */
#include "verdict.h"

#include <string.h>

typedef struct verdict_row {
    const char *name, *label;
    int exit, severity;
    gf_junit_elem junit;
} verdict_row;

static const verdict_row k_rows[GF_V_COUNT] = {
#define GF_VERDICT_ROW(id, name, label, exit, sev, junit) [GF_V_##id] = {name, label, exit, sev, junit},
    GF_VERDICT_LIST(GF_VERDICT_ROW)
#undef GF_VERDICT_ROW
};

const char *gf_verdict_str(gf_verdict v) { return (unsigned)v < GF_V_COUNT ? k_rows[v].name : "?"; }

const char *gf_verdict_label(gf_verdict v) { return (unsigned)v < GF_V_COUNT ? k_rows[v].label : "?"; }

int gf_verdict_parse(const char *s, gf_verdict *out)
{
    for (int i = 0; s && i < GF_V_COUNT; i++)
        if (!strcmp(s, k_rows[i].name)) {
            *out = (gf_verdict)i;
            return 1;
        }
    return 0;
}

int gf_verdict_of_baseline(gf_verdict v) { return v == GF_V_KNOWN || v == GF_V_FIXED; }

static int g_fixed_allowed; /* --baseline-allow-fixed */

void gf_verdict_allow_fixed(int on) { g_fixed_allowed = on != 0; }

int gf_verdict_exit(gf_verdict v, int backend_required)
{
    if ((unsigned)v >= GF_V_COUNT)
        return 2;
    if (v == GF_V_SKIP && backend_required)
        return 1;
    if (v == GF_V_FIXED && g_fixed_allowed)
        return 0;
    return k_rows[v].exit;
}

int gf_verdict_passed(gf_verdict v)
{
    return v == GF_V_PASS || v == GF_V_PASS_NEAR_TIE || (v == GF_V_FIXED && g_fixed_allowed);
}

/* a known finding counts with the skips, as JUnit shows it */
int gf_verdict_skipped(gf_verdict v, int backend_required)
{
    return (v == GF_V_SKIP && !backend_required) || v == GF_V_KNOWN;
}

gf_junit_elem gf_verdict_junit(gf_verdict v, int backend_required)
{
    if ((unsigned)v >= GF_V_COUNT)
        return GF_JUNIT_ERROR;
    if (v == GF_V_SKIP && backend_required)
        return GF_JUNIT_FAILURE;
    if (v == GF_V_FIXED && g_fixed_allowed)
        return GF_JUNIT_NONE;
    return k_rows[v].junit;
}

int gf_exit_combine(int a, int b)
{
    if (a == 2 || b == 2)
        return 2;
    return a == 1 || b == 1 ? 1 : 0;
}

gf_verdict gf_verdict_worse(gf_verdict a, gf_verdict b)
{
    int sa = (unsigned)a < GF_V_COUNT ? k_rows[a].severity : 99;
    int sb = (unsigned)b < GF_V_COUNT ? k_rows[b].severity : 99;
    return sb > sa ? b : a;
}

gf_verdict gf_verdict_of_status(gf_status st)
{
    switch (st) {
    case GF_OK: return GF_V_PASS;
    case GF_E_UNAVAILABLE:
    case GF_E_UNSUPPORTED: return GF_V_SKIP;
    case GF_E_IO:
    case GF_E_FORMAT:
    case GF_E_NOT_FOUND:
    case GF_E_INVALID_ARG:
    case GF_E_CONTEXT_LIMIT: return GF_V_ERROR;
    default: return GF_V_FAIL;
    }
}
