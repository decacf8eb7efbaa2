/* UTF-8 validation and repair for report text (utf8.h). */
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

#include "genfence/util.h"

size_t gf_utf8_seq(const char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    const unsigned char *u = (const unsigned char *)s;
    unsigned char c = u[0];
    size_t len;
    uint32_t v, min;
    if (c == 0)
        return 0;
    if (c < 0x80) {
        if (cp)
            *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        v = c & 0x1Fu;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        v = c & 0x0Fu;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        v = c & 0x07u;
        min = 0x10000;
    } else {
        return 0; /* a continuation byte, C0/C1 (overlong) or F5..FF */
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xC0u) != 0x80u)
            return 0;
        v = (v << 6) | (u[i] & 0x3Fu);
    }
    if (v < min || v > 0x10FFFFu || (v >= 0xD800u && v <= 0xDFFFu))
        return 0;
    if (cp)
        *cp = v;
    return len;
}

int gf_utf8_valid(const char *s, size_t n)
{
    return !memchr(s, 0, n) && gf_utf8_valid_prefix((const uint8_t *)s, n) == n;
}

size_t gf_utf8_tail_start(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && i < 3 && ((unsigned char)s[i] & 0xC0u) == 0x80u)
        i++;
    return i < n && ((unsigned char)s[i] & 0xC0u) != 0x80u ? i : 0;
}

size_t gf_utf8_head_len(const char *s, size_t n)
{
    /* the last lead byte among the final 4: if its sequence does not fit, cut before it */
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xC0u) == 0x80u)
            continue; /* a continuation: look further back */
        size_t want = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return want > back ? n - back : n;
    }
    return n;
}

void gf_utf8_repair_into(gf_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t run = 0; /* start of the valid bytes not yet copied */
    for (size_t i = 0; i < n;) {
        size_t l = gf_utf8_seq(s + i, n - i, NULL);
        if (l) {
            i += l;
            continue;
        }
        gf_buf_put(b, s + run, i - run);
        unsigned char c = (unsigned char)s[i];
        char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
        gf_buf_put(b, e, 4);
        run = ++i;
    }
    gf_buf_put(b, s + run, n - run);
}

char *gf_utf8_repair(const char *s, size_t n)
{
    gf_buf b = {0};
    gf_utf8_repair_into(&b, s, n);
    gf_buf_put(&b, "", 0);
    if (b.oom || !b.p) {
        gf_buf_free(&b);
        return n ? NULL : strdup("");
    }
    return b.p;
}

json_t *gf_json_textn(const char *s, size_t n)
{
    if (!s)
        return json_null();
    if (gf_utf8_valid(s, n))
        return json_stringn(s, n);
    char *r = gf_utf8_repair(s, n);
    json_t *j = r ? json_string(r) : NULL;
    free(r);
    return j ? j : json_string("(text lost: out of memory)");
}

json_t *gf_json_text(const char *s) { return s ? gf_json_textn(s, strlen(s)) : json_null(); }
