/* Buffer guards (engine/guard.c, issue 12 item 4) and verify_cache on logits
 * with no token to pick (issue 12: cur_uncached[-1] and token -1 fed back). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../engine/guard.h"
#include "genfence/engine.h"
#include "ref/ref.h"
#include "support_tiny_model.h"

Test(guard, placement_against_the_trailing_sentinel)
{
    gf_guard g = {0};
    float src[5] = {1, 2, 3, 4, 5};
    float *d = gf_guard_place(&g, sizeof src, src);
    cr_assert_not_null(d, "%s", gf_error_msg());
    cr_assert_eq(memcmp(d, src, sizeof src), 0);
    cr_assert_eq((uintptr_t)d % 16, 0, "malloc's alignment kept");
    size_t tail = (size_t)(g.hi - (unsigned char *)(d + 5));
    cr_assert(tail >= GF_GUARD_SENTINEL && tail < GF_GUARD_SENTINEL + 16, "tail %zu", tail);
    cr_assert((size_t)((unsigned char *)d - g.lo) >= GF_GUARD_SENTINEL);
    size_t before, past;
    cr_assert(gf_guard_check(&g, &before, &past));
    /* a smaller buffer reuses the mapping; a bigger one replaces it */
    unsigned char *map = g.map;
    cr_assert_not_null(gf_guard_place(&g, 8, NULL));
    cr_assert_eq(g.map, map);
    cr_assert(gf_guard_check(&g, &before, &past), "the old buffer's bytes are pattern again");
    cr_assert_not_null(gf_guard_place(&g, 1 << 16, NULL));
    cr_assert_neq(g.map, map);
    gf_guard_release(&g);
    gf_guard_release(&g); /* no-op */
}

Test(guard, stray_writes_found_and_measured)
{
    gf_guard g = {0};
    int32_t *d = gf_guard_place(&g, 10 * sizeof *d, NULL);
    cr_assert_not_null(d);
    size_t before, past;
    ((volatile unsigned char *)d)[40] ^= 0xff; /* the first byte past */
    cr_assert_not(gf_guard_check(&g, &before, &past));
    cr_assert_eq(before, 0);
    cr_assert_eq(past, 1);
    cr_assert(gf_guard_check(&g, &before, &past), "the pattern is restored after a finding");
    ((volatile unsigned char *)d)[-100] ^= 0xff; /* past the 64-byte sentinel, in the slack */
    ((volatile unsigned char *)d)[40 + 50] ^= 0xff;
    cr_assert_not(gf_guard_check(&g, &before, &past));
    cr_assert_eq(before, 100);
    cr_assert_eq(past, 51);
    gf_status st = gf_guard_error(GF_E_BACKEND, "forward call #2", "logits_out", "(x)", 4, "float", before, past);
    cr_assert_eq(st, GF_E_BACKEND);
    cr_assert_str_eq(
        gf_error_msg(),
        "forward call #2: wrote 100 bytes (25 floats) before and 52 bytes (13 floats) past logits_out (x)");
    gf_guard_release(&g);
}

/* ---- through the engine: ref behind a faulty forward ---- */

enum { F_NONE, F_ALL_NEG_INF, F_PAST, F_POSITIONS, F_NO_WRITE };
static int g_fault;
static long long g_calls;
static int32_t g_vocab;

static gf_status fault_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    if (g_fault == F_NO_WRITE && g_calls == 1 && !cache) { /* call 2: returns OK, writes nothing */
        g_calls++;
        return GF_OK;
    }
    gf_status st = gf_backend_ref()->forward(model, cache, in, logits_out);
    size_t n = (size_t)in->B * (size_t)(in->logits_mode == GF_LOGITS_LAST ? 1 : in->T) * (size_t)g_vocab;
    if (st != GF_OK || ++g_calls != 2)
        return st;
    if (g_fault == F_ALL_NEG_INF)
        for (size_t i = 0; i < n; i++)
            logits_out[i] = -INFINITY;
    if (g_fault == F_PAST)
        ((volatile float *)logits_out)[n] = 1.0f;
    if (g_fault == F_POSITIONS)
        ((volatile int32_t *)(uintptr_t)in->position_ids)[0] += 1;
    return st;
}

static gf_backend_ops g_ops;
static tiny_model g_m;
static gf_engine *g_e;

static void fault_engine(int fault)
{
    g_fault = fault;
    g_calls = 0;
    g_ops = *gf_backend_ref();
    g_ops.name = "ref-test-fault";
    g_ops.forward = fault_forward;
    tiny_model_make(&g_m, 64, 128, 16, 2, 2, 42);
    g_vocab = g_m.desc.config.vocab_size;
    gf_backend_options o = {.struct_size = sizeof o, .threads = 1};
    cr_assert_eq(gf_engine_create(&g_ops, &g_m.desc, &o, &g_e), GF_OK, "%s", gf_error_msg());
}

static void fini(void)
{
    gf_engine_destroy(g_e);
    g_e = NULL;
    tiny_model_free(&g_m);
}

TestSuite(guard_engine, .fini = fini);

/* The uncached forward (call 2) returns every logit -inf: verify has no token
 * to pick. It read cur_uncached[-1] and fed token -1 back to the backend; now
 * it is a backend fault with a message, and the result is cleared. */
Test(guard_engine, verify_all_neg_inf_is_a_backend_fault)
{
    fault_engine(F_ALL_NEG_INF);
    int32_t prompt[4] = {5, 17, 3, 60};
    gf_verify_result r;
    gf_status st = gf_verify_cache(g_e, prompt, 4, 3, NULL, 0, NULL, &r);
    cr_assert_eq(st, GF_E_BACKEND, "status %s: %s", gf_status_str(st), gf_error_msg());
    cr_assert(strstr(gf_error_msg(), "-inf"), "%s", gf_error_msg());
    cr_assert(strstr(gf_error_msg(), "ref-test-fault"), "%s", gf_error_msg());
    cr_assert_eq(r.steps, 0);
    cr_assert_null(r.tokens);
    cr_assert_eq(g_calls, 2, "no forward after the fault (token -1 was fed back)");
}

Test(guard_engine, write_past_logits_is_named_and_the_caller_buffer_untouched)
{
    fault_engine(F_PAST);
    int32_t tok[3] = {1, 2, 3}, pos[3] = {0, 1, 2};
    gf_batch in = {.B = 1, .T = 3, .tokens = tok, .position_ids = pos, .logits_mode = GF_LOGITS_ALL};
    float out[3 * 64 + 1];
    cr_assert_eq(gf_engine_forward(g_e, NULL, &in, out), GF_OK, "%s", gf_error_msg());
    float first[3 * 64];
    memcpy(first, out, sizeof first);
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        out[i] = 7.0f;
    gf_status st = gf_engine_forward(g_e, NULL, &in, out);
    cr_assert_eq(st, GF_E_BACKEND);
    cr_assert_str_eq(gf_error_msg(), "backend 'ref-test-fault': forward call #2 (B 1, T 3, uncached, keys 3): wrote 4 "
                                     "bytes (1 float) past logits_out ((B, T, V) = (1, 3, 64) floats)");
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        cr_assert_eq(out[i], 7.0f, "logits_out written on a failed call (index %zu)", i);
    /* the next (clean) call gives ref's logits again */
    cr_assert_eq(gf_engine_forward(g_e, NULL, &in, out), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(memcmp(out, first, sizeof first), 0);
    cr_assert_eq(out[3 * 64], 7.0f, "nothing written past the caller's (B, T, V)");
}

Test(guard_engine, changed_positions_are_named)
{
    fault_engine(F_POSITIONS);
    int32_t tok[2] = {1, 2}, pos[2] = {0, 1};
    gf_batch in = {.B = 1, .T = 2, .tokens = tok, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
    float out[64];
    void *cache = NULL;
    cr_assert_eq(gf_engine_cache_create(g_e, 1, 16, &cache), GF_OK);
    cr_assert_eq(gf_engine_forward(g_e, cache, &in, out), GF_OK, "%s", gf_error_msg());
    int32_t t2 = 3, p2 = 2;
    gf_batch one = {.B = 1, .T = 1, .tokens = &t2, .position_ids = &p2, .logits_mode = GF_LOGITS_LAST};
    cr_assert_eq(gf_engine_forward(g_e, cache, &one, out), GF_E_BACKEND);
    cr_assert_str_eq(gf_error_msg(),
                     "backend 'ref-test-fault': forward call #2 (B 1, T 1, cache length 2): changed "
                     "position_ids ((B, T) = (1, 1) int32), its read-only input: element 0 was 2, is 3");
    cr_assert_eq(p2, 2, "the caller's copy is untouched");
    cr_assert_eq(gf_engine_cache_length(g_e, cache), 3);
    cr_assert_eq(gf_engine_cache_reset(g_e, cache), GF_OK);
    cr_assert_eq(gf_engine_cache_length(g_e, cache), 0);
    cr_assert_gt(gf_engine_cache_bytes(g_e, cache), 0);
    gf_engine_cache_free(g_e, cache);
}

/* A forward that returns GF_OK without writing: the logits are genfence's NaN
 * fill, named as such (not a NaN the backend computed). */
Test(guard_engine, unwritten_logits_are_named)
{
    fault_engine(F_NO_WRITE);
    int32_t tok[2] = {1, 2}, pos[2] = {0, 1};
    gf_batch in = {.B = 1, .T = 2, .tokens = tok, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
    float out[64];
    cr_assert_eq(gf_engine_forward(g_e, NULL, &in, out), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(gf_engine_forward(g_e, NULL, &in, out), GF_E_BACKEND);
    cr_assert(strstr(gf_error_msg(), "forward call #2 (B 1, T 2, uncached, keys 2): logit (row 0, position 1, token 0) "
                                     "is never written (still genfence's NaN fill)"),
              "%s", gf_error_msg());
}

/* model_load's descriptor (gf_desc_guard): the weights are summed before the
 * call and checked after; one changed element is named exactly, at any
 * offset of a block (the 4-lane sums, the zero-padded tail), in any tensor. */
Test(guard, desc_one_changed_weight_is_named_exactly)
{
    tiny_model m;
    tiny_model_make(&m, 300, 64, 16, 2, 2, 7); /* wte (300, 16): 4800 floats, a tail block of 704 */
    float *wte = (float *)(uintptr_t)m.desc.weights.wte;
    const size_t at[] = {0, 1, 3, 4, 1023, 1024, 1027, 4095, 4096, 4797, 4799};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        gf_desc_guard g;
        cr_assert_eq(gf_desc_guard_take(&g, &m.desc), GF_OK);
        cr_assert_eq(gf_desc_guard_verdict(&g, &m.desc, "t"), GF_OK, "%s", gf_error_msg());
        float was = wte[at[k]];
        wte[at[k]] = -was - 0.5f;
        cr_assert_eq(gf_desc_guard_verdict(&g, &m.desc, "t"), GF_E_BACKEND, "element %zu unseen", at[k]);
        char want[160];
        snprintf(want, sizeof want,
                 "t: changed desc->weights.wte ((300, 16) floats), the caller's read-only weights: "
                 "element %zu [%zu, %zu] was %.9g, is %.9g",
                 at[k], at[k] / 16, at[k] % 16, (double)was, (double)(-was - 0.5f));
        cr_assert_str_eq(gf_error_msg(), want);
        wte[at[k]] = was;
        cr_assert_eq(gf_desc_guard_verdict(&g, &m.desc, "t"), GF_OK, "restored");
        gf_desc_guard_release(&g);
    }
    /* a layer tensor; two changes in one block: its range */
    float *w = (float *)(uintptr_t)m.desc.weights.layers[1].mlp_proj_b;
    gf_desc_guard g;
    cr_assert_eq(gf_desc_guard_take(&g, &m.desc), GF_OK);
    const float w2 = w[2], w5 = w[5];
    w[2] += 1.0f;
    cr_assert_eq(gf_desc_guard_verdict(&g, &m.desc, "t"), GF_E_BACKEND);
    cr_assert(strstr(gf_error_msg(), "desc->weights.layers[1].mlp_proj_b ((16) floats)") &&
                  strstr(gf_error_msg(), "element 2 was"),
              "%s", gf_error_msg());
    w[5] += 1.0f;
    cr_assert_eq(gf_desc_guard_verdict(&g, &m.desc, "t"), GF_E_BACKEND);
    cr_assert(strstr(gf_error_msg(), "more than one of elements 0 to 15"), "%s", gf_error_msg());
    w[2] = w2, w[5] = w5; /* exactly: (x + 1) - 1 need not be x */
    /* a pointer of the desc, of a layer */
    gf_model_desc *d = &m.desc;
    const float *keep = d->weights.lnf_w;
    d->weights.lnf_w = d->weights.lnf_b;
    cr_assert_eq(gf_desc_guard_verdict(&g, d, "t"), GF_E_BACKEND);
    cr_assert(strstr(gf_error_msg(), "changed the pointer desc->weights.lnf_w"), "%s", gf_error_msg());
    d->weights.lnf_w = keep;
    gf_layer_weights *ly = (gf_layer_weights *)(uintptr_t)&d->weights.layers[0];
    keep = ly->ln2_b;
    ly->ln2_b = NULL;
    cr_assert_eq(gf_desc_guard_verdict(&g, d, "t"), GF_E_BACKEND);
    cr_assert(strstr(gf_error_msg(), "changed the pointers of desc->weights.layers[0] (the layer's pointer #7"), "%s",
              gf_error_msg());
    ly->ln2_b = keep;
    cr_assert_eq(gf_desc_guard_verdict(&g, d, "t"), GF_OK, "%s", gf_error_msg());
    gf_desc_guard_release(&g);
    gf_desc_guard_release(&g); /* no-op */
    tiny_model_free(&m);
}

/* Pages of [p, p + bytes) mapped in this process (/proc/self/pagemap's
 * present bit), or -1 where pagemap cannot be read. */
static long present_pages(const void *p, size_t bytes)
{
    FILE *f = fopen("/proc/self/pagemap", "rb");
    if (!f)
        return -1;
    long n = 0;
    for (uintptr_t a = (uintptr_t)p; a < (uintptr_t)p + bytes; a += 4096) {
        uint64_t e;
        if (fseek(f, (long)(a / 4096 * sizeof e), SEEK_SET) != 0 || fread(&e, sizeof e, 1, f) != 1) {
            n = -1;
            break;
        }
        n += (long)(e >> 63);
    }
    fclose(f);
    return n;
}

/* The verdict reads every page of the weights again, and leaves them as it
 * found them: a backend that copied the weights and handed the caller's
 * file pages back (the llamacpp backend: lc_gguf.c) does not get them all
 * faulted back in at the load's end (2x the weights resident, issue 27's
 * peak RSS); pages the backend left resident stay so. */
Test(guard, desc_verdict_leaves_the_pages_as_it_found_them)
{
    if (sysconf(_SC_PAGESIZE) != 4096)
        cr_skip_test("pages of %ld bytes: the guard restores 4 KiB pages only", sysconf(_SC_PAGESIZE));
    tiny_model m;
    tiny_model_make(&m, 4096, 64, 64, 1, 2, 7); /* wte (4096, 64): 1 MiB, 256 pages */
    const size_t bytes = (size_t)4096 * 64 * sizeof(float);
    char path[] = "/tmp/gf-guard-pages-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    unlink(path);
    cr_assert_eq(write(fd, m.desc.weights.wte, bytes), (ssize_t)bytes);
    float *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0); /* as engine/safetensors.c maps */
    close(fd);
    cr_assert_neq(map, MAP_FAILED);
    if (m.desc.weights.lm_head == m.desc.weights.wte)
        m.desc.weights.lm_head = map;
    m.desc.weights.wte = map;
    gf_desc_guard g;
    cr_assert_eq(gf_desc_guard_take(&g, &m.desc), GF_OK);
    cr_assert_eq(present_pages(map, bytes), 256, "the take read every page");
#ifdef MADV_PAGEOUT
    (void)madvise(map, bytes, MADV_PAGEOUT); /* the backend hands them back */
#endif
    long out = present_pages(map, bytes);
    if (out != 0)
        cr_skip_test("MADV_PAGEOUT left %ld of 256 pages here (kernel, or pagemap unreadable)", out);
    cr_assert_eq(gf_desc_guard_verdict(&g, &m.desc, "t"), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(present_pages(map, bytes), 0, "the verdict faulted the handed-back pages in again");
    volatile float sink = 0;
    for (size_t i = 0; i < bytes / sizeof(float); i += 1024)
        sink += map[i]; /* a backend reading in place: every page resident */
    (void)sink;
    cr_assert_eq(gf_desc_guard_verdict(&g, &m.desc, "t"), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(present_pages(map, bytes), 256, "the verdict handed back pages the backend kept");
    gf_desc_guard_release(&g);
    munmap(map, bytes);
    tiny_model_free(&m);
}

/* probe's why: a guarded buffer; a write past why_len is GF_E_BACKEND */
static gf_status probe_past(char *why, size_t why_len)
{
    memset(why, 'x', why_len + 3); /* the fault: 3 bytes past */
    return GF_OK;
}

static gf_status probe_fits(char *why, size_t why_len)
{
    memset(why, 'y', why_len - 1);
    why[why_len - 1] = '\0';
    return GF_E_UNAVAILABLE;
}

Test(guard, probe_past_why_len_is_a_backend_fault)
{
    gf_backend_ops ops = *gf_backend_ref();
    ops.probe = probe_past;
    char why[512];
    cr_assert_eq(gf_backend_available(&ops, why, sizeof why), GF_E_BACKEND);
    cr_assert_str_eq(why, "probe: wrote 3 bytes (3 chars) past why (why_len = 512 bytes)");
    ops.probe = probe_fits; /* the whole buffer used, within it: only unavailable */
    cr_assert_eq(gf_backend_available(&ops, why, sizeof why), GF_E_UNAVAILABLE);
    cr_assert_eq(strlen(why), 511);
    gf_model_desc none = {0};
    gf_engine *e = (gf_engine *)1;
    ops.probe = probe_past;
    cr_assert_eq(gf_engine_create(&ops, &none, NULL, &e), GF_E_BACKEND);
    cr_assert_null(e);
    cr_assert_str_eq(gf_error_msg(), "backend 'ref': probe: wrote 3 bytes (3 chars) past why (why_len = 512 bytes)");
}
