/* Report text repair (harness/util/utf8.h): invalid UTF-8 becomes \xNN per
 * byte, valid text is kept byte for byte, a tail cut at a byte offset starts
 * at a whole character, and jansson always gets a string (issue 12, item 7). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

static void repaired(const char *in, size_t n, const char *want)
{
    char *got = gf_utf8_repair(in, n);
    cr_assert_not_null(got);
    cr_expect_str_eq(got, want);
    cr_expect(gf_utf8_valid(got, strlen(got)), "repair of %s is not valid UTF-8", want);
    free(got);
}

Test(report_utf8, valid_text_is_kept)
{
    const char *s = "plain ascii, caf\xc3\xa9, \xe2\x82\xac, \xf0\x9f\x98\x80, back\\slash";
    cr_expect(gf_utf8_valid(s, strlen(s)));
    repaired(s, strlen(s), s);
    repaired("", 0, "");
}

Test(report_utf8, invalid_bytes_become_hex_escapes)
{
    repaired("a\xff"
             "b",
             3, "a\\xFFb");
    repaired("\x80", 1, "\\x80");          /* stray continuation */
    repaired("\xe2\x82", 2, "\\xE2\\x82"); /* euro sign cut after 2 bytes */
    repaired("\xe2\x82z", 3, "\\xE2\\x82z");
    repaired("\xc0\xaf", 2, "\\xC0\\xAF");                   /* overlong '/' */
    repaired("\xe0\x80\xaf", 3, "\\xE0\\x80\\xAF");          /* overlong, 3 bytes */
    repaired("\xed\xa0\x80", 3, "\\xED\\xA0\\x80");          /* surrogate U+D800 */
    repaired("\xf4\x90\x80\x80", 4, "\\xF4\\x90\\x80\\x80"); /* above U+10FFFF */
    repaired("\xf5", 1, "\\xF5");
    repaired("x\0y", 3, "x\\x00y"); /* NUL in counted text */
    cr_expect(!gf_utf8_valid("\xff", 1));
    cr_expect(!gf_utf8_valid("\xe2\x82", 2));
}

Test(report_utf8, sequences)
{
    uint32_t cp = 0;
    cr_expect_eq(gf_utf8_seq("\xe2\x82\xac", 3, &cp), 3);
    cr_expect_eq(cp, 0x20ACu);
    cr_expect_eq(gf_utf8_seq("\xe2\x82\xac", 2, &cp), 0); /* not enough bytes */
    cr_expect_eq(gf_utf8_seq("\xf0\x9f\x98\x80", 4, &cp), 4);
    cr_expect_eq(cp, 0x1F600u);
    cr_expect_eq(gf_utf8_seq("", 1, &cp), 0);
}

Test(report_utf8, cut_points)
{
    const char *e3 = "\xe2\x82\xac\xe2\x82\xac"; /* two euro signs */
    cr_expect_eq(gf_utf8_tail_start(e3, 6), 0);
    cr_expect_eq(gf_utf8_tail_start(e3 + 1, 5), 2);
    cr_expect_eq(gf_utf8_tail_start(e3 + 2, 4), 1);
    cr_expect_eq(gf_utf8_tail_start("\x80\x80\x80\x80z", 5), 0); /* not a cut: left to the repair */
    cr_expect_eq(gf_utf8_head_len(e3, 6), 6);
    cr_expect_eq(gf_utf8_head_len(e3, 5), 3);
    cr_expect_eq(gf_utf8_head_len(e3, 4), 3);
    cr_expect_eq(gf_utf8_head_len("ab", 2), 2);
    cr_expect_eq(gf_utf8_head_len("a\xc3", 2), 1);
}

Test(report_utf8, json_never_loses_the_string)
{
    const char *bad = "reason: \xff\xfe end";
    cr_expect_null(json_string(bad)); /* what dropped the field before */
    json_t *j = gf_json_text(bad);
    cr_assert_not_null(j);
    cr_expect_str_eq(json_string_value(j), "reason: \\xFF\\xFE end");
    json_decref(j);
    j = gf_json_text(NULL);
    cr_expect(json_is_null(j));
    json_decref(j);
    j = gf_json_textn("a\0b", 3);
    cr_expect_str_eq(json_string_value(j), "a\\x00b");
    json_decref(j);
}
