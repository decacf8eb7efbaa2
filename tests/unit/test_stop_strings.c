/* Stop strings (engine/include/genfence/stop.h): the text stops exactly before the
 * first stop string however the stream is cut into pieces, partial matches
 * are held back and released when they fail, and no piece ends inside a
 * UTF-8 character. */
#include <criterion/criterion.h>
#include <string.h>

#include "genfence/stop.h"

/* feed text in pieces of `step` bytes; the whole output into got */
static int run(const char *const *stops, size_t n, const char *text, size_t step, char *got, size_t *got_len)
{
    gf_stop_strings *s = NULL;
    cr_assert_eq(gf_stop_strings_create(stops, n, &s), GF_OK, "%s", gf_error_msg());
    size_t len = strlen(text), w = 0;
    int stopped = 0;
    char out[256];
    for (size_t at = 0; at < len && !stopped; at += step) {
        size_t k = len - at < step ? len - at : step;
        size_t e = gf_stop_strings_feed(s, text + at, k, out, sizeof out, &stopped);
        /* every piece is whole characters: it never ends on a lead byte or mid-sequence */
        if (e) {
            unsigned char last = (unsigned char)out[e - 1];
            cr_assert(last < 0xC0, "a piece ends on lead byte 0x%02x", last);
        }
        memcpy(got + w, out, e);
        w += e;
    }
    if (!stopped)
        w += gf_stop_strings_finish(s, got + w, 64);
    got[w] = 0;
    *got_len = w;
    gf_stop_strings_destroy(s);
    return stopped;
}

Test(stop_strings, cuts_exactly_before_the_first_stop_for_every_piece_size)
{
    const char *stops[] = {"\n\n", "END", "caf\xc3\xa9!"};
    const struct {
        const char *text, *want;
        int stops;
    } cases[] = {
        {"Hello there.\n\nMore", "Hello there.", 1},
        {"an ENDing", "an ", 1},
        {"EN EN E", "EN EN E", 0},                              /* partial matches released */
        {"le caf\xc3\xa9 caf\xc3\xa9!x", "le caf\xc3\xa9 ", 1}, /* a multibyte stop */
        {"na\xc3\xafve \xe2\x82\xac\xf0\x9f\x98\x80", "na\xc3\xafve \xe2\x82\xac\xf0\x9f\x98\x80", 0},
        {"x\nEND\n\n", "x\n", 1}, /* the earliest of two */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t step = 1; step <= 7; step++) {
            char got[256];
            size_t n;
            int st = run(stops, 3, cases[c].text, step, got, &n);
            cr_assert_eq(st, cases[c].stops, "case %zu step %zu: stopped %d", c, step, st);
            cr_assert_str_eq(got, cases[c].want, "case %zu step %zu", c, step);
        }
}

Test(stop_strings, nothing_after_the_stop_and_empty_stops_refused)
{
    const char *stops[] = {"ab"};
    gf_stop_strings *s = NULL;
    cr_assert_eq(gf_stop_strings_create(stops, 1, &s), GF_OK);
    char out[64];
    int stopped = 0;
    cr_assert_eq(gf_stop_strings_feed(s, "xa", 2, out, sizeof out, &stopped), 1); /* 'a' held */
    cr_assert_eq(stopped, 0);
    cr_assert_eq(gf_stop_strings_feed(s, "bcd", 3, out, sizeof out, &stopped), 0);
    cr_assert_eq(stopped, 1);
    cr_assert_eq(gf_stop_strings_feed(s, "more", 4, out, sizeof out, &stopped), 0);
    cr_assert_eq(stopped, 1);
    cr_assert_eq(gf_stop_strings_finish(s, out, sizeof out), 0);
    gf_stop_strings_destroy(s);
    gf_stop_strings_destroy(NULL);
    const char *bad[] = {""};
    cr_assert_eq(gf_stop_strings_create(bad, 1, &s), GF_E_INVALID_ARG);
    cr_assert_null(s);
}
