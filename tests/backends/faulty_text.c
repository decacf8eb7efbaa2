/* The ref backend behind a wrapper whose messages are not valid UTF-8, for
 * the report-integrity test (tests/cli/report_integrity.sh): a failure
 * reason must survive into run.json and junit.xml, repaired (\xNN), not
 * dropped (issue 12, item 7).
 *
 *   "ref-bad-text": the 2nd forward call fails (GF_E_BACKEND) with a
 *   last_error holding a stray 0xFF, a lone continuation byte, an euro sign
 *   cut after its second byte and a NUL-free valid "é"; before failing it
 *   writes about 9 KB of euro signs (3 bytes each) and more invalid bytes to
 *   stderr, so the parent's 8 KiB tail is cut inside a character.
 *
 * Every other slot is ref's. Output: libgenfence_test_faulty_ref_bad_text.so. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "genfence/backend.h"
#include "ref/ref.h"

#define BAD_TEXT "bad bytes \xff|\x80|\xe2\x82|caf\xc3\xa9 (injected by tests/backends/faulty_text.c)"

static gf_backend_ops g_ops;
static long long g_forward_calls;

static gf_status text_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    if (++g_forward_calls == 2) {
        static const char euro[] = "\xe2\x82\xac";
        char buf[9000];
        for (size_t i = 0; i + 3 <= 9000; i += 3)
            memcpy(buf + i, euro, 3);
        static const char end[] = "\nstderr: \xfe\xff end\n";
        /* 9000 + 16 - 8192 = 824 = 3 * 274 + 2: the kept tail starts mid-character */
        ssize_t w = write(2, buf, 9000);
        w += write(2, end, sizeof end - 1);
        (void)w;
        return GF_E_BACKEND; /* the text comes through last_error */
    }
    return gf_backend_ref()->forward(model, cache, in, logits_out);
}

static const char *text_last_error(void *model)
{
    (void)model;
    return g_forward_calls == 2 ? BAD_TEXT : NULL;
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.name = "ref-bad-text";
        g_ops.description = "ref whose error text is not valid UTF-8 (tests/backends/faulty_text.c)";
        g_ops.forward = text_forward;
        g_ops.last_error = text_last_error;
    }
    return &g_ops;
}
