/* Stop strings over streamed text (engine/include/genfence/stop.h). */
#include "genfence/stop.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct gf_stop_strings {
    char **stops;
    size_t *lens;
    size_t n, max_len;
    char *buf; /* held-back bytes, then the piece being fed (cap) */
    size_t held, cap;
    int stopped;
};

void gf_stop_strings_destroy(gf_stop_strings *s)
{
    if (!s)
        return;
    for (size_t i = 0; s->stops && i < s->n; i++)
        free(s->stops[i]);
    free(s->stops);
    free(s->lens);
    free(s->buf);
    free(s);
}

gf_status gf_stop_strings_create(const char *const *stops, size_t n, gf_stop_strings **out)
{
    *out = NULL;
    if (n && !stops)
        return gf_error_set(GF_E_INVALID_ARG, "stop strings: NULL list");
    gf_stop_strings *s = calloc(1, sizeof *s);
    if (!s)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    s->stops = calloc(n ? n : 1, sizeof *s->stops);
    s->lens = calloc(n ? n : 1, sizeof *s->lens);
    if (!s->stops || !s->lens) {
        gf_stop_strings_destroy(s);
        return gf_error_set(GF_E_NOMEM, "out of memory");
    }
    s->n = n;
    for (size_t i = 0; i < n; i++) {
        if (!stops[i] || !stops[i][0]) {
            gf_stop_strings_destroy(s);
            return gf_error_set(GF_E_INVALID_ARG, "stop string %zu is empty", i);
        }
        s->lens[i] = strlen(stops[i]);
        s->stops[i] = malloc(s->lens[i] + 1);
        if (!s->stops[i]) {
            gf_stop_strings_destroy(s);
            return gf_error_set(GF_E_NOMEM, "out of memory");
        }
        memcpy(s->stops[i], stops[i], s->lens[i] + 1);
        if (s->lens[i] > s->max_len)
            s->max_len = s->lens[i];
    }
    *out = s;
    return GF_OK;
}

/* Length of the UTF-8 sequence lead byte b starts (1 for ASCII and for bytes
 * that start nothing: those are passed through as they are). */
static size_t seq_len(uint8_t b)
{
    if (b >= 0xC2 && b <= 0xDF)
        return 2;
    if (b >= 0xE0 && b <= 0xEF)
        return 3;
    if (b >= 0xF0 && b <= 0xF4)
        return 4;
    return 1;
}

/* How many trailing bytes of b (n) are an incomplete UTF-8 sequence. */
static size_t incomplete_tail(const char *b, size_t n)
{
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        uint8_t c = (uint8_t)b[n - back];
        if ((c & 0xC0) == 0x80)
            continue; /* a continuation byte: look further back */
        size_t need = seq_len(c);
        return need > back ? back : 0;
    }
    return 0;
}

static int grow(gf_stop_strings *s, size_t need)
{
    if (need <= s->cap)
        return 1;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < need)
        cap *= 2;
    char *b = realloc(s->buf, cap);
    if (!b)
        return 0;
    s->buf = b;
    s->cap = cap;
    return 1;
}

size_t gf_stop_strings_feed(gf_stop_strings *s, const char *text, size_t len, char *out, size_t out_cap, int *stopped)
{
    *stopped = s->stopped;
    if (s->stopped || !grow(s, s->held + len + 1))
        return 0;
    memcpy(s->buf + s->held, text, len);
    size_t n = s->held + len;
    /* the earliest occurrence of any stop string */
    size_t cut = n;
    for (size_t i = 0; i < s->n; i++)
        for (size_t at = 0; at + s->lens[i] <= n && at < cut; at++)
            if (!memcmp(s->buf + at, s->stops[i], s->lens[i])) {
                cut = at;
                break;
            }
    size_t emit;
    if (cut < n) {
        emit = cut;
        s->stopped = *stopped = 1;
    } else { /* hold the longest suffix that a stop string starts with */
        size_t hold = 0;
        for (size_t i = 0; i < s->n; i++)
            for (size_t k = s->lens[i] - 1; k > hold; k--)
                if (k <= n && !memcmp(s->buf + n - k, s->stops[i], k)) {
                    hold = k;
                    break;
                }
        size_t t = incomplete_tail(s->buf, n - hold);
        emit = n - hold - t;
    }
    if (emit > out_cap)
        emit = out_cap;
    memcpy(out, s->buf, emit);
    s->held = s->stopped ? 0 : n - emit;
    memmove(s->buf, s->buf + emit, s->held);
    return emit;
}

size_t gf_stop_strings_finish(gf_stop_strings *s, char *out, size_t out_cap)
{
    if (s->stopped)
        return 0;
    size_t n = s->held < out_cap ? s->held : out_cap;
    memcpy(out, s->buf, n);
    s->held = 0;
    s->stopped = 1;
    return n;
}
