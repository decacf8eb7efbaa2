/* The ref backend behind a wrapper with one fault: the fault sits in the
 * table around ref, so ref itself stays untouched. Every fault's number,
 * name, what it breaks and its expected verdict: the one table in
 * tests/backends/CMakeLists.txt. The #if lines below switch on those numbers
 * (GF_FAULT); HELPER_S: how long a forked helper lives unless genfence kills
 * it. Faults 41, 45-49 and 81 (ref-bad-cache, ref-short-window, ref-row-mix,
 * ref-attn-no-max, ref-rope-off-by-one, ref-rms-eps-outside, ref-head-dim-80)
 * sit inside ref's forward where no wrapper reaches: they
 * are patches (tests/backends/patches/) to a copy of backends/ref/ref_forward.c,
 * and this file only names them. Every other slot is ref's. */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "genfence/backend.h"
#include "ref/ref.h"

#ifndef GF_FAULT
#error "GF_FAULT selects the fault"
#endif
#ifndef GF_FAULT_NAME
#error "GF_FAULT_NAME names the backend"
#endif

static gf_backend_ops g_ops;

#define HELPER_S 300 /* a helper genfence does not kill outlives any test */

#if GF_FAULT == 20 || GF_FAULT == 21
/* a helper in the backend's process group, holding every inherited fd */
static void fork_helper(void)
{
    pid_t p = fork();
    if (p == 0) {
        sleep(HELPER_S);
        _exit(0);
    }
}
#endif

#if GF_FAULT == 31
#include <pthread.h>
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_started, g_unloading;
static volatile int *volatile g_nowhere; /* NULL: a write through it faults */
/* outlives model_free: when genfence unloads the module (after model_free
 * has returned) it writes where nothing is, as a worker thread writing into
 * freed model memory would */
static void *late_writer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_mu);
    while (!g_unloading)
        pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    *g_nowhere = 1;
    return NULL;
}

/* dlclose runs this in genfence's thread: wake the writer and wait for it
 * (it ends the process), so the crash always lands after model_free */
__attribute__((destructor)) static void unloading(void)
{
    if (!g_started)
        return;
    pthread_mutex_lock(&g_mu);
    g_unloading = 1;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    for (;;)
        pause();
}
#endif

#if GF_FAULT == 22
/* a daemon: fork, setsid (a new session and group), fork again; the middle
 * process exits, the daemon keeps every fd (the result pipe too) */
static void daemonise_helper(void)
{
    pid_t p = fork();
    if (p == 0) {
        setsid();
        if (fork() == 0) {
            sleep(HELPER_S);
            _exit(0);
        }
        _exit(0);
    }
}
#endif

#if GF_FAULT == 26
/* a forged record on every pipe this process holds (the result pipe among
 * them), as a backend that knows genfence's protocol but not its nonce.
 * SIGPIPE ignored: genfence may have inherited a pipe whose reader is gone
 * (from whatever started it), and dying of that is not this fault. */
static void forge_record(void)
{
    static const char rec[] =
        "{\"verdict\":\"pass\",\"reason\":\"forged\",\"checks\":[],\"metrics\":{},\"seeds\":{},\"artifacts\":[]}\n";
    signal(SIGPIPE, SIG_IGN);
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int fd = atoi(e->d_name);
        struct stat sb;
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd == dirfd(d) || fstat(fd, &sb) != 0 || !S_ISFIFO(sb.st_mode))
            continue;
        if (write(fd, rec, sizeof rec - 1) < 0) { /* a read end: not ours to write */
        }
    }
    closedir(d);
}
#endif

static gf_status faulty_probe(char *why, size_t why_len)
{
#if GF_FAULT == 1
    (void)why, (void)why_len;
    raise(SIGSEGV);
    return GF_OK;
#elif GF_FAULT == 2
    (void)why, (void)why_len;
    for (;;)
        pause();
    return GF_E_UNAVAILABLE; /* not reached */
#elif GF_FAULT == 20
    fork_helper();
    return gf_backend_ref()->probe(why, why_len);
#elif GF_FAULT == 8
    if (why && why_len)
        snprintf(why, why_len, "no test device here (tests/backends/faulty.c)");
    return GF_E_UNAVAILABLE;
#else
    return gf_backend_ref()->probe(why, why_len);
#endif
}

#if GF_FAULT == 30
/* the environment switch NAME: 1 when set to something other than "0" (unset: dflt) */
static int env_switch(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? strcmp(v, "0") != 0 : dflt;
}
#endif

static long long g_forward_calls;
static size_t g_vocab; /* V of the loaded model */

static gf_status faulty_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    g_vocab = (size_t)desc->config.vocab_size;
#if GF_FAULT == 21
    fork_helper();
#elif GF_FAULT == 22
    daemonise_helper();
#elif GF_FAULT == 31
    pthread_t th;
    if (pthread_create(&th, NULL, late_writer, NULL) == 0) {
        pthread_detach(th);
        g_started = 1;
    }
#elif GF_FAULT == 32
    const char *sd = getenv("GF_TEST_STRAY_DIR");
    if (sd && sd[0]) {
        char p[4096];
        snprintf(p, sizeof p, "%s/stray-backend.log", sd);
        FILE *f = fopen(p, "w");
        if (f) {
            fputs("a backend's log, left in the report folder\n", f);
            fclose(f);
        }
    }
#elif GF_FAULT == 82
    if (desc->config.d_head == 80) { /* ref's info still declares every probe */
        *model_out = NULL;
        return GF_E_UNSUPPORTED; /* the text comes through last_error */
    }
#elif GF_FAULT == 28
    void *huge = malloc((size_t)1 << 41);
    if (!huge) {
        *model_out = NULL;
        return GF_E_NOMEM; /* the text comes through last_error */
    }
    free(huge); /* an allocator that promises 2 TiB: carry on */
#endif
    return gf_backend_ref()->model_load(desc, opts, model_out);
}

static gf_status faulty_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    const gf_backend_ops *r = gf_backend_ref();
    gf_status st = r->info ? r->info(opts, info_out) : GF_E_UNSUPPORTED;
#if GF_FAULT == 6
    if (st == GF_OK)
        info_out->dtype = GF_COMPUTE_BF16;
#elif GF_FAULT == 241 || GF_FAULT == 242 || GF_FAULT == 243
    if (st ==
        GF_OK) /* 241: ref's f32 cache declared q8_0; 242: its patch stores q8_0 (honest); 243: with a bad K scale */
        info_out->kv_cache = "q8_0";
#endif
    return st;
}

/* forward and the trace slot: one path, so a fault shows in the trace too
 * (req NULL: plain forward) */
static gf_status faulty_forward_any(void *model, void *cache, const gf_batch *in, float *logits_out,
                                    const gf_trace_request *req)
{
    long long call = ++g_forward_calls;
#if GF_FAULT == 5
    if (call == 2)
        return GF_E_NOMEM; /* the text comes through last_error */
#elif GF_FAULT == 29
    if (call == 2)
        return GF_E_BACKEND; /* the text comes through last_error */
#elif GF_FAULT == 23
    if (call == 1)
        for (int fd = 0; fd < 1024; fd++)
            close(fd);
#elif GF_FAULT == 24
    if (call == 1) {
        sigset_t ss;
        sigemptyset(&ss);
        sigaddset(&ss, SIGALRM);
        sigprocmask(SIG_BLOCK, &ss, NULL);
        for (volatile unsigned long long spin = 0;; spin++)
            ;
    }
#elif GF_FAULT == 25
    if (call == 1)
        exit(0);
#elif GF_FAULT == 26
    if (call == 1) {
        forge_record();
        _exit(0);
    }
#elif GF_FAULT == 27
    if (call == 1)
        abort();
#endif
#if GF_FAULT == 42
    gf_batch unmasked = *in;
    unmasked.key_mask = NULL; /* the mask dropped: left padding leaks into attention */
    in = &unmasked;
#endif
    gf_status st = req ? gf_backend_ref()->forward_trace(model, cache, in, logits_out, req)
                       : gf_backend_ref()->forward(model, cache, in, logits_out);
#if GF_FAULT == 43
    if (st == GF_OK && cache) { /* a segfault in the first cached forward ref accepts */
        volatile int *volatile nowhere = NULL;
        *nowhere = 1;
    }
#elif GF_FAULT == 120
    if (st == GF_OK) {       /* slow but progressing: each forward takes GF_SLOW_MS (default 200) ms more */
        const char *ms = getenv("GF_SLOW_MS");
        long v = ms ? strtol(ms, NULL, 10) : 200;
        struct timespec ts = {.tv_sec = v / 1000, .tv_nsec = (v % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
#elif GF_FAULT == 44
    /* never returns from a forward ref accepts: asleep, as a deadlock would be
     * (busy-spin, 24, is the CPU-bound hang); a spin here burnt a core for each
     * run's whole --timeout. The child's SIGALRM (default action) still ends it. */
    if (st == GF_OK)
        for (;;)
            pause();
#endif
#if GF_FAULT == 3
    if (st == GF_OK && call == 2)
        logits_out[7] = NAN; /* row 0, token 7 */
#endif
#if GF_FAULT == 265
    /* every position's logits of an uncached prefill one position late (position
     * t reports t - 1's; 0 keeps its own): a prompt-logprobs bug that the last
     * position alone never shows (GF_LOGITS_LAST and single steps are right) */
    if (st == GF_OK && !cache && in->logits_mode == GF_LOGITS_ALL && in->T > 1)
        for (int32_t b = 0; b < in->B; b++)
            for (int32_t t = in->T - 1; t >= 1; t--)
                memcpy(logits_out + ((size_t)b * in->T + t) * g_vocab,
                       logits_out + ((size_t)b * in->T + t - 1) * g_vocab, g_vocab * sizeof *logits_out);
#endif
#if GF_FAULT == 11
    if (st == GF_OK && in->key_mask) {
        int32_t Tk = cache ? gf_backend_ref()->cache_length(cache) : in->T; /* length + T after the call */
        size_t per = (size_t)(in->logits_mode == GF_LOGITS_LAST ? 1 : in->T) * g_vocab;
        for (int32_t b = 0; b < in->B; b++) {
            int any = 0;
            for (int32_t j = 0; j < Tk; j++)
                any |= in->key_mask[(size_t)b * Tk + j];
            for (size_t i = 0; !any && i < per; i++)
                logits_out[(size_t)b * per + i] = NAN;
        }
    }
#endif
#if GF_FAULT == 30
    if (st == GF_OK && env_switch("GF_KNOWN_FAULT", 1)) {
        size_t n = (size_t)in->B * (size_t)(in->logits_mode == GF_LOGITS_LAST ? 1 : in->T) * g_vocab;
        for (size_t i = 7; g_vocab > 7 && i < n; i += g_vocab)
            logits_out[i] += 1e-3f;
    }
#endif
#if GF_FAULT == 6 || GF_FAULT == 7
    if (st == GF_OK) { /* round to nearest even bfloat16: keep the top 16 bits */
        size_t n = (size_t)in->B * (size_t)(in->logits_mode == GF_LOGITS_LAST ? 1 : in->T) * g_vocab;
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &logits_out[i], sizeof u);
            u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
            memcpy(&logits_out[i], &u, sizeof u);
        }
    }
#endif
    (void)call;
    return st;
}

static gf_status faulty_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    return faulty_forward_any(model, cache, in, logits_out, NULL);
}

static gf_status faulty_forward_trace(void *model, void *cache, const gf_batch *in, float *logits_out,
                                      const gf_trace_request *req)
{
    return faulty_forward_any(model, cache, in, logits_out, req);
}

static int32_t faulty_cache_length(const void *cache)
{
    int32_t n = gf_backend_ref()->cache_length(cache);
#if GF_FAULT == 4
    if (n > 0)
        n++;
#elif GF_FAULT == 30
    if (n > 0 && env_switch("GF_NEW_FAULT", 0))
        n++;
#endif
    return n;
}

static gf_status faulty_cache_reset(void *cache)
{
#if GF_FAULT == 9
    (void)cache;
    return GF_OK;
#else
    return gf_backend_ref()->cache_reset(cache);
#endif
}

static size_t faulty_cache_bytes(const void *cache)
{
#if GF_FAULT == 10
    (void)cache;
    return 64;
#elif GF_FAULT == 12
    return gf_backend_ref()->cache_bytes(cache) / 2; /* an f32 cache counted as f16 */
#else
    return gf_backend_ref()->cache_bytes(cache);
#endif
}

static const char *faulty_last_error(void *model)
{
#if GF_FAULT == 5
    (void)model;
    return g_forward_calls == 2 ? "out of device memory (injected by tests/backends/faulty.c)" : NULL;
#elif GF_FAULT == 28
    (void)model;
    return "could not allocate 2 TiB of weights buffer (injected by tests/backends/faulty.c)";
#elif GF_FAULT == 29
    (void)model;
    return g_forward_calls == 2 ? "device lost (injected by tests/backends/faulty.c)" : NULL;
#elif GF_FAULT == 82
    (void)model;
    return "head dim 80 has no kernel here (injected by tests/backends/faulty.c)";
#else
    const gf_backend_ops *r = gf_backend_ref();
    return GF_OPS_HAS(r, last_error) && r->last_error ? r->last_error(model) : NULL;
#endif
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.name = GF_FAULT_NAME;
        g_ops.description = "ref with a fault (tests/backends/faulty.c)";
        g_ops.probe = faulty_probe;
        g_ops.forward = faulty_forward;
        g_ops.forward_trace = faulty_forward_trace;
        g_ops.model_load = faulty_model_load;
        g_ops.info = faulty_info;
        g_ops.cache_length = faulty_cache_length;
        g_ops.cache_reset = faulty_cache_reset;
        g_ops.cache_bytes = faulty_cache_bytes;
        g_ops.last_error = faulty_last_error;
    }
    return &g_ops;
}
