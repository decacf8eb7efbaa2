/* The invariance a backend declares (harness/kit/invariance_decl.c): the
 * AXIS=LEVEL grammar, "all", later entries overriding, the default (gated,
 * not said), and a refusal that names the entry. */
#include <criterion/criterion.h>
#include <string.h>

#include "invariance_decl.h"

Test(invariance_decl, nothing_said_is_gated)
{
    gf_inv_decl d;
    char err[256];
    cr_assert_eq(gf_inv_decl_parse(NULL, &d, err, sizeof err), 0);
    for (int a = 0; a < GF_INV_N_AXES; a++) {
        cr_expect_eq(d.level[a], GF_INV_LEVEL_GATED);
        cr_expect_eq(d.said[a], 0);
    }
    cr_assert_eq(gf_inv_decl_parse("", &d, err, sizeof err), 0);
    cr_expect_eq(d.level[GF_INV_batch], GF_INV_LEVEL_GATED);
}

Test(invariance_decl, all_then_overrides)
{
    gf_inv_decl d;
    char err[256];
    cr_assert_eq(gf_inv_decl_parse("all=bitwise,batch=gated,split=none", &d, err, sizeof err), 0, "%s", err);
    cr_expect_eq(d.level[GF_INV_batch], GF_INV_LEVEL_GATED);
    cr_expect_eq(d.level[GF_INV_split], GF_INV_LEVEL_NONE);
    cr_expect_eq(d.level[GF_INV_prefix], GF_INV_LEVEL_BITWISE);
    for (int a = 0; a < GF_INV_N_AXES; a++)
        cr_expect_eq(d.said[a], 1);
    cr_assert_eq(gf_inv_decl_parse("threads=bitwise,all=none", &d, err, sizeof err), 0);
    cr_expect_eq(d.level[GF_INV_threads], GF_INV_LEVEL_NONE); /* the later entry wins */
    cr_assert_eq(gf_inv_decl_parse("position=bitwise", &d, err, sizeof err), 0);
    cr_expect_eq(d.level[GF_INV_position], GF_INV_LEVEL_BITWISE);
    cr_expect_eq(d.said[GF_INV_position], 1);
    cr_expect_eq(d.said[GF_INV_mixed], 0);
}

Test(invariance_decl, refusals_name_the_entry)
{
    gf_inv_decl d;
    char err[256];
    cr_expect_eq(gf_inv_decl_parse("batch=exact", &d, err, sizeof err), -1);
    cr_expect(strstr(err, "unknown level 'exact'") && strstr(err, "bitwise"), "%s", err);
    cr_expect_eq(gf_inv_decl_parse("all=bitwise,rows=gated", &d, err, sizeof err), -1);
    cr_expect(strstr(err, "unknown axis 'rows'") && strstr(err, "prefix"), "%s", err);
    cr_expect_eq(gf_inv_decl_parse("bitwise", &d, err, sizeof err), -1);
    cr_expect(strstr(err, "not AXIS=LEVEL"), "%s", err);
    cr_expect_eq(gf_inv_decl_parse("batch=gated,,split=gated", &d, err, sizeof err), -1);
    cr_expect(strstr(err, "empty"), "%s", err);
}

Test(invariance_decl, names)
{
    cr_expect_str_eq(gf_inv_axis_name(GF_INV_repeat), "repeat");
    cr_expect_eq(gf_inv_axis_find("mixed"), GF_INV_mixed);
    cr_expect_eq(gf_inv_axis_find("all"), -1);
    cr_expect_str_eq(gf_inv_level_verdict(GF_INV_LEVEL_GATED), "within gate");
    cr_expect_str_eq(gf_inv_level_word(GF_INV_LEVEL_NONE), "none");
}
