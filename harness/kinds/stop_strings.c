/* stop_strings: the streamed text of a model's tokenizer (the token bytes of
 * a text, an explicit id list or seeded random ids) through the engine's stop
 * strings (engine/include/genfence/stop.h) stops exactly before the first occurrence
 * of any stop string, however the stream is split, and every piece it
 * releases is whole UTF-8 characters. Two streams, each fed split every way
 * the case asks (per token, byte by byte, at every single byte, seeded random
 * splits):
 *   text  token bytes -> gf_utf8_stream -> stop strings; the reference is the
 *         whole decode (invalid bytes as U+FFFD) cut before the first stop
 *   raw   token bytes -> stop strings directly (split inside characters too);
 *         the reference is the raw bytes cut the same way; where they are
 *         valid UTF-8, every released piece must be too
 * The references are this file's own search, not the engine's. Uses the
 * model directory's tokenizer only (no backend): "the engine alone".
 * `matcher: naive` replaces the engine's matcher by the wrong way (each piece
 * searched alone, nothing held back) for must-fail cases. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/stop.h"
#include "genfence/tokenizer.h"
#include "genfence/util.h"
#include "buf.h"
#include "token_source.h"

#define STOP_MAX       64   /* stop strings per case */
#define STOP_MAX_BYTES 4096 /* stream bytes the single-split scheme covers */

typedef struct stop_spec {
    gf_token_source src;    /* text, tokens or sample: up to 1 << 16 tokens */
    long long seed, splits; /* seed: the random splits' */
    char **stops;
    size_t n_stops;
    char *expect_text;
    int has_expect_stop, expect_stop;
    int naive; /* matcher: MATCH_INCREMENTAL (0), MATCH_NAIVE, MATCH_LATE */
} stop_spec;

enum { MATCH_INCREMENTAL, MATCH_NAIVE, MATCH_LATE };

static void stop_free(void *p)
{
    stop_spec *s = p;
    if (s) {
        gf_token_source_free(&s->src);
        gf_y_strings_free(s->stops, s->n_stops);
        free(s->expect_text);
    }
    free(s);
}

static const char *const k_matchers[] = {"incremental", "naive", "late", NULL};

static int parse_stop(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    stop_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->seed = 1337;
    s->splits = 16;
    int bad = gf_y_token_source(ctx, m, 1 << 16, &s->src);
    if (bad < 0)
        return -1;
    const gf_ynode *sn = gf_y_get(ctx, m, "stop", 0);
    int rs = gf_y_strings(ctx, m, "stop", GF_Y_REQUIRED, &s->stops, &s->n_stops);
    bad |= rs < 0;
    if (rs > 0 && (s->n_stops == 0 || s->n_stops > STOP_MAX)) {
        gf_y_error(ctx, sn, "'stop' needs 1 to %d strings, got %zu", STOP_MAX, s->n_stops);
        bad = 1;
    }
    for (size_t i = 0; rs > 0 && i < s->n_stops; i++)
        if (!s->stops[i][0]) {
            gf_y_error(ctx, sn, "'stop' entry %zu is empty (an empty stop string would stop at once)", i);
            bad = 1;
        }
    bad |= gf_y_string(ctx, m, "expect_text", 0, &s->expect_text) < 0;
    const int re = gf_y_bool(ctx, m, "expect_stop", 0, &s->expect_stop);
    bad |= re < 0;
    s->has_expect_stop = re > 0;
    bad |= gf_y_int(ctx, m, "splits", 0, 0, 4096, &s->splits) < 0;
    bad |= gf_y_int(ctx, m, "seed", 0, 0, 0x7fffffffffffffffLL, &s->seed) < 0;
    bad |= gf_y_enum(ctx, m, "matcher", 0, k_matchers, &s->naive) < 0;
    return bad ? -1 : 0;
}

/* The reference cut: the first byte offset where any stop string starts
 * (n when none does). */
static size_t first_stop(const char *t, size_t n, char *const *stops, size_t n_stops)
{
    for (size_t at = 0; at < n; at++)
        for (size_t i = 0; i < n_stops; i++) {
            size_t l = strlen(stops[i]);
            if (l <= n - at && !memcmp(t + at, stops[i], l))
                return at;
        }
    return n;
}

/* ---- the matcher under test: the engine's, or the naive one ---- */

typedef struct matcher {
    gf_stop_strings *eng;
    char *const *stops;
    size_t n_stops, max_len;
    int naive, stopped; /* naive: the stop_spec's matcher */
    gf_buf pending;     /* late: the engine's last release, given out one feed later */
} matcher;

static gf_status matcher_open(matcher *m, const stop_spec *s)
{
    memset(m, 0, sizeof *m);
    m->stops = s->stops;
    m->n_stops = s->n_stops;
    m->naive = s->naive;
    for (size_t i = 0; i < s->n_stops; i++)
        if (strlen(s->stops[i]) > m->max_len)
            m->max_len = strlen(s->stops[i]);
    if (m->naive == MATCH_NAIVE)
        return GF_OK;
    return gf_stop_strings_create((const char *const *)s->stops, s->n_stops, &m->eng);
}

/* one piece in; what is released goes to out (cap >= len + max_len + 8) */
static size_t matcher_feed(matcher *m, const char *p, size_t len, char *out, size_t cap)
{
    if (m->naive == MATCH_INCREMENTAL)
        return gf_stop_strings_feed(m->eng, p, len, out, cap, &m->stopped);
    if (m->naive == MATCH_LATE) { /* the engine's release, one feed late (all of it at a stop) */
        size_t w = gf_stop_strings_feed(m->eng, p, len, out, cap, &m->stopped), k = m->pending.n;
        if (k + w > cap)
            return 0;
        char *was = m->pending.p;
        m->pending = (gf_buf){0};
        if (m->stopped) {
            memmove(out + k, out, w);
            if (k)
                memcpy(out, was, k);
            free(was);
            return k + w;
        }
        gf_buf_put(&m->pending, out, w);
        if (k)
            memcpy(out, was, k);
        free(was);
        return k;
    }
    if (m->stopped)
        return 0;
    size_t cut = first_stop(p, len, m->stops, m->n_stops);
    m->stopped = cut < len;
    memcpy(out, p, cut);
    return cut;
}

static size_t matcher_finish(matcher *m, char *out, size_t cap)
{
    if (m->naive == MATCH_NAIVE)
        return 0;
    size_t k = m->pending.n < cap ? m->pending.n : cap;
    if (k)
        memcpy(out, m->pending.p, k);
    gf_buf_free(&m->pending);
    return k + gf_stop_strings_finish(m->eng, out + k, cap - k);
}

/* ---- the schemes: how a stream of bytes is cut into pieces ---- */

enum { SPLIT_TOKENS, SPLIT_BYTES, SPLIT_AT, SPLIT_RANDOM };

typedef struct stream_res {
    gf_buf out;
    int stopped;
    size_t pieces, bad_pieces; /* released pieces; those not valid UTF-8 */
    size_t late;               /* feeds after which more was held back than the rule allows */
    char first_late[160];
    gf_status st;
} stream_res;

/* What a stream may hold back after input f (n bytes), by the rule
 * (docs/cases.md, stop_strings): the longest suffix that is a proper prefix
 * of a stop string, then before it an unfinished UTF-8 character (a lead
 * byte whose sequence needs more bytes than follow it). Everything else
 * must have been released: a complete character held back is late. */
static size_t may_hold(const char *f, size_t n, char *const *stops, size_t n_stops)
{
    size_t hold = 0;
    for (size_t i = 0; i < n_stops; i++) {
        const size_t L = strlen(stops[i]);
        for (size_t k = L ? L - 1 : 0; k > hold; k--)
            if (k <= n && !memcmp(f + n - k, stops[i], k)) {
                hold = k;
                break;
            }
    }
    const size_t m = n - hold;
    for (size_t back = 1; back <= 3 && back <= m; back++) {
        const uint8_t c = (uint8_t)f[m - back];
        if ((c & 0xC0) == 0x80)
            continue;
        const size_t need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 1;
        return hold + (need > back ? back : 0);
    }
    return hold;
}

/* After a feed: the released total against what the rule lets be held. */
static void check_late(stream_res *r, const matcher *m, const gf_buf *fed)
{
    if (m->stopped || m->naive == MATCH_NAIVE)
        return;
    const size_t bound = fed->n - may_hold(fed->p ? fed->p : "", fed->n, m->stops, m->n_stops);
    if (r->out.n < bound && r->late++ == 0)
        snprintf(r->first_late, sizeof r->first_late,
                 "after %zu bytes in, %zu released; the rule holds back at most %zu", fed->n, r->out.n, fed->n - bound);
}

/* Feed bytes (n) cut at the ascending offsets cuts (n_cuts, each in (0, n))
 * through the UTF-8 stream when text, then the matcher. */
static void run_stream(const stop_spec *s, int text, const char *bytes, size_t n, const size_t *cuts, size_t n_cuts,
                       stream_res *r)
{
    memset(r, 0, sizeof *r);
    matcher m;
    r->st = matcher_open(&m, s);
    if (r->st != GF_OK)
        return;
    gf_utf8_stream u8;
    gf_utf8_stream_init(&u8);
    const size_t cap = 3 * (n + 4) + m.max_len + 16;
    char *dec = malloc(cap), *out = malloc(cap);
    if (!dec || !out) {
        r->st = gf_error_set(GF_E_NOMEM, "out of memory");
        goto done;
    }
    gf_buf fed = {0}; /* every byte the matcher was given */
    size_t from = 0;
    for (size_t c = 0; c <= n_cuts; c++) {
        const size_t to = c < n_cuts ? cuts[c] : n;
        const char *piece = bytes + from;
        size_t len = to - from, w;
        if (text) {
            len = gf_utf8_stream_feed(&u8, (const uint8_t *)piece, len, dec, cap);
            piece = dec;
        }
        w = matcher_feed(&m, piece, len, out, cap);
        gf_buf_put(&fed, piece, len);
        if (w) {
            r->pieces++;
            r->bad_pieces += (gf_utf8_valid_prefix((const uint8_t *)out, w) != w);
            gf_buf_put(&r->out, out, w);
        }
        check_late(r, &m, &fed);
        from = to;
    }
    if (text && !m.stopped) {
        size_t len = gf_utf8_stream_finish(&u8, dec, cap);
        size_t w = matcher_feed(&m, dec, len, out, cap);
        gf_buf_put(&fed, dec, len);
        if (w) {
            r->pieces++;
            r->bad_pieces += (gf_utf8_valid_prefix((const uint8_t *)out, w) != w);
            gf_buf_put(&r->out, out, w);
        }
        check_late(r, &m, &fed);
    }
    if (!m.stopped) {
        size_t w = matcher_finish(&m, out, cap);
        if (w) {
            r->pieces++;
            r->bad_pieces += (gf_utf8_valid_prefix((const uint8_t *)out, w) != w);
            gf_buf_put(&r->out, out, w);
        }
    }
    r->stopped = m.stopped;
    if (r->out.oom || fed.oom)
        r->st = gf_error_set(GF_E_NOMEM, "out of memory");
done:
    gf_buf_free(&fed);
    free(dec);
    free(out);
    gf_buf_free(&m.pending);
    gf_stop_strings_destroy(m.eng);
}

typedef struct tally {
    size_t runs, wrong, wrong_stop, bad_pieces, late;
    char first_text[256], first_stop[256], first_utf8[256], first_late[300]; /* the first scheme that went wrong */
} tally;

static void judge(tally *t, const char *scheme, const stream_res *r, const char *ref, size_t ref_len, int ref_stop,
                  int utf8_ref)
{
    t->runs++;
    int same = r->out.n == ref_len && (ref_len == 0 || !memcmp(r->out.p, ref, ref_len));
    if (!same) {
        t->wrong++;
        size_t i = 0;
        while (i < r->out.n && i < ref_len && r->out.p[i] == ref[i])
            i++;
        if (!t->first_text[0])
            snprintf(t->first_text, sizeof t->first_text,
                     "%s: %zu bytes out, %zu expected, first difference at byte %zu", scheme, r->out.n, ref_len, i);
    }
    if (r->stopped != ref_stop) {
        t->wrong_stop++;
        if (!t->first_stop[0])
            snprintf(t->first_stop, sizeof t->first_stop, "%s: stopped %d, expected %d", scheme, r->stopped, ref_stop);
    }
    if (r->late) {
        t->late += r->late;
        if (!t->first_late[0])
            snprintf(t->first_late, sizeof t->first_late, "%s: %.200s", scheme, r->first_late);
    }
    if (utf8_ref && r->bad_pieces) {
        t->bad_pieces += r->bad_pieces;
        if (!t->first_utf8[0])
            snprintf(t->first_utf8, sizeof t->first_utf8,
                     "%s: %zu of %zu released pieces are not whole UTF-8 characters", scheme, r->bad_pieces, r->pieces);
    }
}

/* Every scheme over one stream; tok_ends (n_tok) are the token boundaries. */
static gf_status run_schemes(const stop_spec *s, int text, const char *bytes, size_t n, const size_t *tok_ends,
                             size_t n_tok, const char *ref, size_t ref_len, int ref_stop, int utf8_ref, tally *t)
{
    size_t *cuts = malloc((n + 1) * sizeof *cuts);
    if (!cuts)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    stream_res r;
    char name[96];
    gf_status st = GF_OK;
    const char *sn = text ? "text" : "raw";
    for (int scheme = SPLIT_TOKENS; scheme <= SPLIT_RANDOM && st == GF_OK; scheme++) {
        size_t reps = scheme == SPLIT_AT       ? (n <= STOP_MAX_BYTES ? n + 1 : 0)
                      : scheme == SPLIT_RANDOM ? (size_t)s->splits
                                               : 1;
        for (size_t rep = 0; rep < reps && st == GF_OK; rep++) {
            size_t nc = 0;
            if (scheme == SPLIT_TOKENS) {
                for (size_t i = 0; i + 1 < n_tok; i++)
                    if (tok_ends[i] > 0 && tok_ends[i] < n && (nc == 0 || tok_ends[i] > cuts[nc - 1]))
                        cuts[nc++] = tok_ends[i];
                snprintf(name, sizeof name, "%s stream, per token", sn);
            } else if (scheme == SPLIT_BYTES) {
                for (size_t i = 1; i < n; i++)
                    cuts[nc++] = i;
                snprintf(name, sizeof name, "%s stream, byte by byte", sn);
            } else if (scheme == SPLIT_AT) {
                if (rep > 0 && rep < n)
                    cuts[nc++] = rep;
                snprintf(name, sizeof name, "%s stream, split at byte %zu", sn, rep);
            } else {
                for (size_t i = 1; i < n; i++)
                    if (gf_rng_uniform((uint64_t)s->seed, 0x73746f70ULL + (text ? 0 : 1), rep, (uint32_t)i) < 0.3)
                        cuts[nc++] = i;
                snprintf(name, sizeof name, "%s stream, random split %zu (seed %lld)", sn, rep, s->seed);
            }
            run_stream(s, text, bytes, n, cuts, nc, &r);
            st = r.st;
            if (st == GF_OK)
                judge(t, name, &r, ref, ref_len, ref_stop, utf8_ref);
            gf_buf_free(&r.out);
        }
    }
    free(cuts);
    return st;
}

static void run_stop(const gf_case *c, gf_krun *k)
{
    const stop_spec *s = c->spec;
    gf_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0, *ends = NULL;
    gf_buf bytes = {0};
    char *full = NULL;
    gf_status st;
    if (gf_token_source_open(&s->src, c->model, k, &tok, &ids, &n) < 0 ||
        gf_token_bytes(tok, ids, n, k, &bytes, &ends) < 0)
        goto done;
    size_t full_len = 0;
    if ((st = gf_tokenizer_decode(tok, ids, n, &full, &full_len)) != GF_OK || bytes.oom) {
        gf_k_fail(k, "decode: %s", bytes.oom ? "out of memory" : gf_error_msg());
        goto done;
    }
    const char *raw = bytes.p ? bytes.p : "";
    gf_k_metric_json(k, "tokens", gf_json_ints(ids, n));
    gf_k_metric_json(k, "matcher", json_string(k_matchers[s->naive]));
    json_t *js = json_array();
    for (size_t i = 0; i < s->n_stops; i++)
        json_array_append_new(js, json_string(s->stops[i]));
    gf_k_metric_json(k, "stop", js);

    /* the references: this file's search over the whole text and the whole bytes */
    const size_t cut_text = first_stop(full, full_len, s->stops, s->n_stops);
    const size_t cut_raw = first_stop(raw, bytes.n, s->stops, s->n_stops);
    const int stop_text = cut_text < full_len, stop_raw = cut_raw < bytes.n;
    const int utf8 = gf_utf8_valid_prefix((const uint8_t *)raw, bytes.n) == bytes.n;
    gf_k_metric_json(k, "expected_text", json_stringn(full, cut_text));
    gf_k_metric_int(k, "cut_byte", stop_text ? (long long)cut_text : -1);
    gf_k_metric_int(k, "bytes", (long long)bytes.n);
    gf_k_metric_json(k, "valid_utf8", json_boolean(utf8));

    tally tt = {0}, tr = {0};
    st = run_schemes(s, 1, raw, bytes.n, ends, n, full, cut_text, stop_text, 1, &tt);
    if (st == GF_OK)
        st = run_schemes(s, 0, raw, bytes.n, ends, n, raw, cut_raw, stop_raw, utf8, &tr);
    if (st != GF_OK) {
        gf_k_status(k, st, "stop strings");
        goto done;
    }
    gf_k_metric_int(k, "streams", (long long)(tt.runs + tr.runs));
    gf_k_check(k, tt.wrong == 0 && tr.wrong == 0, "stops exactly before the stop string",
               "%zu of %zu streams released other text than the whole text cut before its first stop string%s%s",
               tt.wrong + tr.wrong, tt.runs + tr.runs, tt.wrong || tr.wrong ? "; first: " : "",
               tt.wrong ? tt.first_text : tr.first_text);
    gf_k_check(k, tt.wrong_stop == 0 && tr.wrong_stop == 0, "stops when a stop string occurs",
               "%zu of %zu streams reported the wrong stop (a stop string %s)%s%s", tt.wrong_stop + tr.wrong_stop,
               tt.runs + tr.runs, stop_text ? "occurs" : "does not occur",
               tt.wrong_stop || tr.wrong_stop ? "; first: " : "", tt.wrong_stop ? tt.first_stop : tr.first_stop);
    gf_k_check(k, tt.bad_pieces == 0 && tr.bad_pieces == 0, "released pieces are whole UTF-8 characters",
               "%zu pieces split a character%s%s", tt.bad_pieces + tr.bad_pieces,
               tt.bad_pieces || tr.bad_pieces ? "; first: " : "", tt.bad_pieces ? tt.first_utf8 : tr.first_utf8);
    if (s->naive != MATCH_NAIVE)
        gf_k_check(k, tt.late == 0 && tr.late == 0, "releases what no stop string or unfinished character holds",
                   "%zu feeds held back more%s%s", tt.late + tr.late, tt.late || tr.late ? "; first: " : "",
                   tt.late ? tt.first_late : tr.first_late);
    if (s->expect_text) {
        const size_t el = strlen(s->expect_text);
        const int ok = el == cut_text && !memcmp(full, s->expect_text, el);
        gf_k_check(k, ok, "expected text", "the text before the first stop string is %zu bytes, expect_text %zu%s",
                   cut_text, el, ok ? "" : ": they differ");
    }
    if (s->has_expect_stop)
        gf_k_check(k, stop_text == s->expect_stop, "expected stop", "a stop string %s the text (expect_stop: %s)",
                   stop_text ? "occurs in" : "does not occur in", s->expect_stop ? "true" : "false");
done:
    gf_tokenizer_free(tok);
    free(ids);
    free(ends);
    free(full);
    gf_buf_free(&bytes);
}

const gf_kind_def gf_kind_stop_strings = {
    .name = "stop_strings",
    .summary = "streamed text stops exactly before the first stop string, split anywhere, whole UTF-8 characters",
    .needs = GF_KIND_NEEDS_TOKENIZER,
    .reaches = GF_KIND_REACHES_NONE,
    .parse = parse_stop,
    .free_spec = stop_free,
    .run = run_stop,
};
