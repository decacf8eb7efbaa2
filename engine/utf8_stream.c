/* UTF-8 with CPython's errors="replace" semantics: validation, one-shot
 * decoding and the incremental decoder (gf_utf8_stream_*).
 *
 * CPython (like Rust's String::from_utf8_lossy) replaces each "maximal
 * subpart" of an ill-formed sequence by one U+FFFD (Unicode ch. 3, "U+FFFD
 * substitution of maximal subparts"): a lead byte followed by as many
 * continuation bytes as are still valid for it counts once, and the byte that
 * broke the sequence is examined again as the start of a new one. Valid lead
 * bytes and the range allowed for the byte after them:
 *   C2..DF  80..BF  (+0)      E0  A0..BF (+1)   E1..EC, EE..EF  80..BF (+1)
 *   ED      80..9F  (+1)      F0  90..BF (+2)   F1..F3  80..BF (+2)   F4  80..8F (+2)
 * (+k: k more bytes 80..BF follow). 80..C1 and F5..FF never start a sequence.
 *
 * The one-shot decoder scans ahead; the stream is a byte-at-a-time state
 * machine. They are written independently so the tests can check one
 * against the other. */
#include <string.h>

#include "tokenizer_internal.h"

/* Total length of the sequence lead byte b starts (0: not a lead byte) and
 * the range allowed for the second byte. */
static int lead_info(uint8_t b, uint8_t *lo, uint8_t *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF)
        return 2;
    if (b == 0xE0) {
        *lo = 0xA0;
        return 3;
    }
    if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF)
        return 3;
    if (b == 0xED) {
        *hi = 0x9F;
        return 3;
    }
    if (b == 0xF0) {
        *lo = 0x90;
        return 4;
    }
    if (b >= 0xF1 && b <= 0xF3)
        return 4;
    if (b == 0xF4) {
        *hi = 0x8F;
        return 4;
    }
    return 0;
}

/* Length of the valid sequence at s (1..4), or -(length of the maximal
 * invalid subpart at s) (-1 .. -3); the input ends at n. */
static int scan_seq(const uint8_t *s, size_t n)
{
    uint8_t lo, hi;
    if (s[0] < 0x80)
        return 1;
    int need = lead_info(s[0], &lo, &hi);
    if (need == 0)
        return -1;
    size_t j = 1;
    if (j < n && s[j] >= lo && s[j] <= hi) {
        j++;
        while ((int)j < need && j < n && s[j] >= 0x80 && s[j] <= 0xBF)
            j++;
    }
    return (int)j == need ? need : -(int)j;
}

size_t gf_utf8_valid_prefix(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int k = scan_seq(s + i, n - i);
        if (k < 0)
            return i;
        i += (size_t)k;
    }
    return n;
}

static const char k_fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

size_t gf_utf8_decode_replace(const uint8_t *s, size_t n, char *out)
{
    size_t i = 0, o = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            out[o++] = (char)s[i++];
            continue;
        }
        int k = scan_seq(s + i, n - i);
        if (k > 0) {
            memcpy(out + o, s + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        } else {
            memcpy(out + o, k_fffd, 3);
            o += 3;
            i += (size_t)-k;
        }
    }
    out[o] = '\0';
    return o;
}

size_t gf_utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

uint32_t gf_utf8_get(const uint8_t *s, size_t n, size_t *len_out)
{
    uint8_t b = s[0];
    if (b < 0x80 || n < 2) {
        *len_out = 1;
        return b;
    }
    if (b < 0xE0) {
        *len_out = 2;
        return ((uint32_t)(b & 0x1F) << 6) | (s[1] & 0x3F);
    }
    if (b < 0xF0 || n < 4) {
        *len_out = 3;
        return ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    *len_out = 4;
    return ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
           (s[3] & 0x3F);
}

int gf_unicode_is_space(uint32_t cp)
{
    if (cp <= 0x20)
        return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x85)
        return 0;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* --- the incremental decoder --- */

typedef struct sink {
    char *out;
    size_t cap, n;
} sink;

/* Never writes past cap - 1 (the NUL's place); a caller that provides the
 * documented capacity never loses bytes. */
static void put(sink *k, const void *p, size_t len)
{
    if (k->cap == 0 || k->n + len > k->cap - 1)
        return;
    memcpy(k->out + k->n, p, len);
    k->n += len;
}

static void stream_byte(gf_utf8_stream *s, sink *k, uint8_t b)
{
    for (;;) {
        if (s->n_pending == 0) {
            uint8_t lo, hi;
            if (b < 0x80)
                put(k, &b, 1);
            else if (lead_info(b, &lo, &hi))
                s->pending[s->n_pending++] = b;
            else
                put(k, k_fffd, 3);
            return;
        }
        uint8_t lo, hi;
        int need = lead_info(s->pending[0], &lo, &hi);
        if (s->n_pending > 1) {
            lo = 0x80;
            hi = 0xBF;
        }
        if (b >= lo && b <= hi) {
            s->pending[s->n_pending++] = b;
            if (s->n_pending == need) {
                put(k, s->pending, (size_t)need);
                s->n_pending = 0;
            }
            return;
        }
        /* The held-back prefix is a maximal invalid subpart; b starts anew. */
        put(k, k_fffd, 3);
        s->n_pending = 0;
    }
}

void gf_utf8_stream_init(gf_utf8_stream *s) { memset(s, 0, sizeof *s); }

size_t gf_utf8_stream_feed(gf_utf8_stream *s, const uint8_t *bytes, size_t len, char *out, size_t out_cap)
{
    sink k = {out, out_cap, 0};
    if (s->n_pending < 0 || s->n_pending > 3)
        s->n_pending = 0; /* defensive: an uninitialised stream */
    for (size_t i = 0; i < len; i++)
        stream_byte(s, &k, bytes[i]);
    if (out_cap)
        out[k.n] = '\0';
    return k.n;
}

size_t gf_utf8_stream_finish(gf_utf8_stream *s, char *out, size_t out_cap)
{
    sink k = {out, out_cap, 0};
    if (s->n_pending > 0)
        put(&k, k_fffd, 3);
    s->n_pending = 0;
    if (out_cap)
        out[k.n] = '\0';
    return k.n;
}
