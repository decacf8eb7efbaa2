/* The invariance kind's measurements: for one axis, the reference call and
 * its variants, each reduced to the probe row's logits (invariance.h). Every
 * call goes through the engine (gf_generate, gf_engine_*); the thread axis
 * opens more sessions of the same backend and the repeat axis runs
 * `genfence forward` in other processes. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "genfence/engine.h"
#include "genfence/safetensors.h"
#include "invariance.h"
#include "sys.h"

extern char **environ;

static gf_status trace_alloc(inv_trace *t, int32_t n, int32_t V)
{
    t->n = n;
    t->V = V;
    t->logits = calloc((size_t)n * (size_t)V, sizeof *t->logits);
    t->tokens = calloc((size_t)n, sizeof *t->tokens);
    if (!t->logits || !t->tokens)
        return gf_error_set(GF_E_NOMEM, "invariance: out of memory for %d x %d logits", n, V);
    return GF_OK;
}

static void trace_free(inv_trace *t)
{
    free(t->logits);
    free(t->tokens);
    memset(t, 0, sizeof *t);
}

void inv_result_clear(inv_result *r)
{
    for (int i = 0; i < r->n_refs; i++)
        trace_free(&r->refs[i]);
    for (int i = 0; i < r->n; i++)
        trace_free(&r->v[i].tr);
    free(r->v);
    memset(r, 0, sizeof *r);
}

/* A new reference trace slot (its label set), or NULL. */
static inv_trace *new_ref(inv_result *r, const char *fmt, const char *arg)
{
    if (r->n_refs >= INV_MAX_REFS)
        return NULL;
    snprintf(r->ref_label[r->n_refs], sizeof r->ref_label[0], fmt, arg);
    return &r->refs[r->n_refs++];
}

/* A new variant against reference ref, or NULL (out of memory). */
static inv_variant *new_variant(inv_result *r, int ref, int teacher_forced)
{
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        inv_variant *v = realloc(r->v, (size_t)cap * sizeof *v);
        if (!v)
            return NULL;
        r->v = v;
        r->cap = cap;
    }
    inv_variant *v = &r->v[r->n++];
    memset(v, 0, sizeof *v);
    v->ref = ref;
    v->teacher_forced = teacher_forced;
    return v;
}

/* A negative control's run stops once its last variant differs from its
 * reference: that is all it has to show. */
static int stop(const inv_target *tg, const inv_result *r)
{
    if (!tg->until_differs || r->n == 0)
        return 0;
    const inv_variant *v = &r->v[r->n - 1];
    const inv_trace *a = &r->refs[v->ref], *b = &v->tr;
    return a->n != b->n || memcmp(a->logits, b->logits, (size_t)a->n * (size_t)a->V * sizeof(float)) != 0;
}

/* Row r's tokens when it is not the probe: the probe's shifted by 37 r in
 * the vocabulary (same length, first token unlike the probe's and every
 * other filler's), so no two rows share a prefix. out (n). */
static void filler(const int32_t *probe, int32_t n, int32_t r, int32_t V, int32_t *out)
{
    for (int32_t i = 0; i < n; i++)
        out[i] = (int32_t)(((int64_t)probe[i] + 37 * (int64_t)r) % V);
}

/* ---- the probe row of a greedy cached batch (gf_generate) ---- */

typedef struct capture {
    inv_trace *t;
    int32_t row;
} capture;

static gf_status capture_step(void *user, const gf_step_info *info)
{
    capture *c = user;
    if (info->step < c->t->n) {
        memcpy(c->t->logits + (size_t)info->step * c->t->V, info->logits + (size_t)c->row * info->V,
               (size_t)info->V * sizeof(float));
        c->t->tokens[info->step] = info->tokens[c->row];
    }
    return GF_OK;
}

/* B rows (prompts[b], lens[b]), left-padded, greedy for steps tokens; row
 * `row`'s logits of every step into t. */
static gf_status gen_probe(gf_engine *e, int32_t B, int32_t *const *prompts, const int32_t *lens, int32_t steps,
                           int32_t row, inv_trace *t)
{
    gf_status st = trace_alloc(t, steps, gf_engine_config(e)->vocab_size);
    if (st != GF_OK)
        return st;
    capture cap = {.t = t, .row = row};
    gf_generate_params gp = gf_generate_defaults();
    gp.max_new_tokens = steps;
    gp.sampler = gf_sampler_greedy();
    gp.eos_id = -1;
    gp.use_cache = 1;
    gp.on_step = capture_step;
    gp.user = &cap;
    gf_generation *g = NULL;
    st = gf_generate(e, B, (const int32_t *const *)prompts, lens, &gp, &g);
    if (st == GF_OK && g->steps != steps)
        st = gf_error_set(GF_E_BACKEND, "invariance: %d of %d steps ran", g->steps, steps);
    gf_generation_free(g);
    return st;
}

/* The batch B rows: the probe at row `at`, fillers of its length elsewhere
 * (row r: filler r; row `at`'s filler goes to row 0). rows (B) point into
 * store (B, n). */
static void batch_rows(const int32_t *probe, int32_t n, int32_t B, int32_t at, int32_t V, int32_t *store,
                       int32_t **rows, int32_t *lens)
{
    for (int32_t b = 0; b < B; b++) {
        rows[b] = store + (size_t)b * n;
        lens[b] = n;
        if (b == at)
            memcpy(rows[b], probe, (size_t)n * sizeof *probe);
        else
            filler(probe, n, b == 0 ? at : b, V, rows[b]);
    }
}

/* The probe at row `at` of B rows of its length. */
static gf_status gen_in_batch(gf_engine *e, const inv_target *tg, int32_t B, int32_t at, int32_t steps, inv_trace *t)
{
    const int32_t n = tg->n_probe, V = gf_engine_config(e)->vocab_size;
    int32_t *store = malloc((size_t)B * n * sizeof *store), **rows = malloc((size_t)B * sizeof *rows); /* (B, n) */
    int32_t *lens = malloc((size_t)B * sizeof *lens);
    gf_status st = store && rows && lens ? GF_OK : gf_error_set(GF_E_NOMEM, "invariance: out of memory");
    if (st == GF_OK) {
        batch_rows(tg->probe, n, B, at, V, store, rows, lens);
        st = gen_probe(e, B, rows, lens, steps, at, t);
    }
    free(store);
    free(rows);
    free(lens);
    return st;
}

/* ---- one row through the cache, prefilled in chunks ---- */

/* prompt (n) prefilled into a new (1, n + steps) cache in chunks of `chunk`
 * (0: one shot), then greedy for steps - 1 more: t (steps). */
static gf_status split_probe(gf_engine *e, const int32_t *prompt, int32_t n, int32_t chunk, int32_t steps, inv_trace *t)
{
    const int32_t V = gf_engine_config(e)->vocab_size;
    gf_status st = trace_alloc(t, steps, V);
    void *cache = NULL;
    int32_t *pos = malloc((size_t)(n + steps) * sizeof *pos); /* (n + steps) */
    if (st == GF_OK && !pos)
        st = gf_error_set(GF_E_NOMEM, "invariance: out of memory");
    if (st == GF_OK)
        st = gf_engine_cache_create(e, 1, n + steps, &cache);
    for (int32_t i = 0; st == GF_OK && i < n + steps; i++)
        pos[i] = i;
    for (int32_t at = 0; st == GF_OK && at < n;) {
        int32_t T = chunk > 0 && chunk < n - at ? chunk : n - at;
        gf_batch in = {.B = 1, .T = T, .tokens = prompt + at, .position_ids = pos + at, .logits_mode = GF_LOGITS_LAST};
        st = gf_engine_forward(e, cache, &in, t->logits); /* (1, 1, V): the last chunk's is step 0 */
        at += T;
    }
    for (int32_t s = 0; st == GF_OK && s < steps; s++) {
        t->tokens[s] = gf_row_top(t->logits + (size_t)s * V, V, NULL, NULL);
        if (s + 1 == steps)
            break;
        int32_t tok = t->tokens[s];
        gf_batch one = {.B = 1, .T = 1, .tokens = &tok, .position_ids = pos + n + s, .logits_mode = GF_LOGITS_LAST};
        st = gf_engine_forward(e, cache, &one, t->logits + (size_t)(s + 1) * V);
    }
    gf_engine_cache_free(e, cache);
    free(pos);
    return st;
}

/* ---- every position of one input (teacher-forced) ---- */

/* Row `row` of an uncached forward of tokens (B, T), every position: t (T). */
static gf_status all_positions(gf_engine *e, int32_t B, const int32_t *tokens, int32_t T, int32_t row, inv_trace *t)
{
    const int32_t V = gf_engine_config(e)->vocab_size;
    gf_status st = trace_alloc(t, T, V);
    int32_t *pos = malloc((size_t)B * T * sizeof *pos);           /* (B, T) */
    float *out = malloc((size_t)B * T * (size_t)V * sizeof *out); /* (B, T, V) */
    if (st == GF_OK && (!pos || !out))
        st = gf_error_set(GF_E_NOMEM, "invariance: out of memory");
    for (int32_t i = 0; st == GF_OK && i < B * T; i++)
        pos[i] = i % T;
    gf_batch in = {.B = B, .T = T, .tokens = tokens, .position_ids = pos, .logits_mode = GF_LOGITS_ALL};
    if (st == GF_OK)
        st = gf_engine_forward(e, NULL, &in, out);
    if (st == GF_OK) {
        memcpy(t->logits, out + (size_t)row * T * V, (size_t)T * V * sizeof *out);
        for (int32_t i = 0; i < T; i++)
            t->tokens[i] = gf_row_top(t->logits + (size_t)i * V, V, NULL, NULL);
    }
    free(pos);
    free(out);
    return st;
}

/* ---- the axes ---- */

static int32_t clamp_len(const gf_engine *e, int32_t n, int32_t steps)
{
    int32_t room = gf_engine_config(e)->n_positions - steps;
    return n < room ? n : room;
}

static gf_status axis_batch(const inv_spec *s, const inv_target *tg, inv_result *r)
{
    static const int32_t def[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    const int32_t *sw = s->n_sweep ? s->sweep : def;
    const size_t nsw = s->n_sweep ? s->n_sweep : sizeof def / sizeof def[0];
    gf_engine *e = tg->session->engine;
    snprintf(r->what, sizeof r->what, "the probe alone (B = 1), greedy, %lld steps", s->steps);
    gf_status st = gen_in_batch(e, tg, 1, 0, (int32_t)s->steps, new_ref(r, "%s", "B=1 (alone)"));
    for (size_t i = 0; st == GF_OK && !stop(tg, r) && i < nsw; i++) {
        inv_variant *v = new_variant(r, 0, 0);
        if (!v)
            return gf_error_set(GF_E_NOMEM, "invariance: out of memory");
        snprintf(v->label, sizeof v->label, "B=%d (probe at row 0)", sw[i]);
        st = gen_in_batch(e, tg, sw[i], 0, (int32_t)s->steps, &v->tr);
    }
    return st;
}

static gf_status axis_position(const inv_spec *s, const inv_target *tg, inv_result *r)
{
    const int32_t B = (int32_t)s->batch;
    gf_engine *e = tg->session->engine;
    snprintf(r->what, sizeof r->what, "the probe at row 0 of %d, greedy, %lld steps", B, s->steps);
    gf_status st = gen_in_batch(e, tg, B, 0, (int32_t)s->steps, new_ref(r, "%s", "row 0"));
    for (int32_t i = 0; st == GF_OK && !stop(tg, r) && i < (s->n_sweep ? (int32_t)s->n_sweep : B); i++) {
        int32_t at = s->n_sweep ? s->sweep[i] : i;
        if (at >= B)
            return gf_error_set(GF_E_INVALID_ARG, "invariance: sweep row %d is outside the batch of %d", at, B);
        inv_variant *v = new_variant(r, 0, 0);
        if (!v)
            return gf_error_set(GF_E_NOMEM, "invariance: out of memory");
        snprintf(v->label, sizeof v->label, "row %d of %d", at, B);
        st = gen_in_batch(e, tg, B, at, (int32_t)s->steps, &v->tr);
    }
    return st;
}

static gf_status axis_mixed(const inv_spec *s, const inv_target *tg, inv_result *r)
{
    gf_engine *e = tg->session->engine;
    const int32_t n = tg->n_probe, V = gf_engine_config(e)->vocab_size, steps = (int32_t)s->steps;
    const int32_t n_others = tg->n_others, B = 1 + n_others;
    snprintf(r->what, sizeof r->what, "the probe at row 0 of %d rows of its length (%d tokens), greedy, %d steps", B, n,
             steps);
    gf_status st = gen_in_batch(e, tg, B, 0, steps, new_ref(r, "%s", "co-resident rows of the probe's length"));
    int32_t **rows = calloc((size_t)B, sizeof *rows), *lens = calloc((size_t)B, sizeof *lens);
    int32_t *store = malloc((size_t)B * n * sizeof *store); /* (B, n): fillers */
    if (st == GF_OK && (!rows || !lens || !store))
        st = gf_error_set(GF_E_NOMEM, "invariance: out of memory");
    /* variant i < n_others: row 1 holds other i, the rest fillers; variant n_others: every row an other */
    for (int32_t i = 0; st == GF_OK && !stop(tg, r) && i <= n_others; i++) {
        rows[0] = (int32_t *)tg->probe;
        lens[0] = n;
        char desc[64] = "";
        for (int32_t b = 1; b < B; b++) {
            int other = i == n_others || b == 1;
            int32_t o = i == n_others ? b - 1 : i;
            if (other) {
                rows[b] = tg->others[o];
                lens[b] = tg->other_lens[o];
                size_t dl = strlen(desc);
                snprintf(desc + dl, sizeof desc - dl, "%s%d", dl ? ", " : "", lens[b]);
            } else {
                rows[b] = store + (size_t)b * n;
                lens[b] = n;
                filler(tg->probe, n, b, V, rows[b]);
            }
        }
        inv_variant *v = new_variant(r, 0, 0);
        if (!v) {
            st = gf_error_set(GF_E_NOMEM, "invariance: out of memory");
            break;
        }
        snprintf(v->label, sizeof v->label, "%s of %s tokens beside the probe's %d", i == n_others ? "rows" : "a row",
                 desc, n);
        st = gen_probe(e, B, rows, lens, steps, 0, &v->tr);
    }
    free(rows);
    free(lens);
    free(store);
    return st;
}

static gf_status axis_threads(const inv_spec *s, const inv_target *tg, inv_result *r)
{
    int32_t def[3] = {1, 2, gf_cpu_count()};
    const int32_t *sw = s->n_sweep ? s->sweep : def;
    const size_t nsw = s->n_sweep ? s->n_sweep : 3;
    const int32_t B = (int32_t)s->batch, steps = (int32_t)s->steps;
    snprintf(r->what, sizeof r->what, "the probe at row 0 of %d on %d thread%s, greedy, %d steps", B, sw[0],
             sw[0] == 1 ? "" : "s", steps);
    gf_status st = GF_OK;
    for (size_t i = 0; st == GF_OK && !stop(tg, r) && i < nsw; i++) {
        int dup = 0;
        for (size_t j = 0; j < i; j++)
            dup |= sw[j] == sw[i];
        if (dup && i > 0)
            continue; /* the machine's cores may be 1 or 2 */
        gf_session more, *ss = tg->session;
        int opened = 0;
        if (sw[i] != tg->threads) {
            st = gf_session_open(&more, tg->model, tg->spec, sw[i], GF_SESSION_TOK_NONE);
            if (st != GF_OK)
                return gf_error_prefix(st, "invariance: a session on %d threads", sw[i]);
            ss = &more;
            opened = 1;
        }
        inv_trace *t;
        if (i == 0) {
            char lab[32];
            snprintf(lab, sizeof lab, "%d", sw[0]);
            t = new_ref(r, "threads %s", lab);
        } else {
            inv_variant *v = new_variant(r, 0, 0);
            if (!v) {
                if (opened)
                    gf_session_close(&more);
                return gf_error_set(GF_E_NOMEM, "invariance: out of memory");
            }
            snprintf(v->label, sizeof v->label, "threads %d", sw[i]);
            t = &v->tr;
        }
        st = gen_in_batch(ss->engine, tg, B, 0, steps, t);
        if (opened)
            gf_session_close(&more);
    }
    return st;
}

static gf_status axis_split(const inv_spec *s, const inv_target *tg, inv_result *r)
{
    static const int32_t def[] = {1, 7, 16, 64};
    const int32_t *sw = s->n_sweep ? s->sweep : def;
    const size_t nsw = s->n_sweep ? s->n_sweep : sizeof def / sizeof def[0];
    gf_engine *e = tg->session->engine;
    const int32_t steps = (int32_t)s->steps, n = clamp_len(e, tg->n_probe, steps);
    snprintf(r->what, sizeof r->what, "the probe's %d tokens prefilled in one shot, then %d greedy steps", n, steps);
    gf_status st = split_probe(e, tg->probe, n, 0, steps, new_ref(r, "%s", "one shot"));
    size_t dl = 0;
    for (size_t i = 0; st == GF_OK && !stop(tg, r) && i < nsw; i++) {
        if (sw[i] >= n) { /* one shot again: say so rather than count it */
            dl += (size_t)snprintf(r->skipped + dl, dl < sizeof r->skipped ? sizeof r->skipped - dl : 0,
                                   "%schunks of %d (the prompt has %d tokens: one shot)", dl ? "; " : "", sw[i], n);
            dl = dl < sizeof r->skipped ? dl : sizeof r->skipped - 1;
            continue;
        }
        inv_variant *v = new_variant(r, 0, 0);
        if (!v)
            return gf_error_set(GF_E_NOMEM, "invariance: out of memory");
        snprintf(v->label, sizeof v->label, "chunks of %d", sw[i]);
        st = split_probe(e, tg->probe, n, sw[i], steps, &v->tr);
    }
    return st;
}

/* `genfence forward` of tokens (n) in another process: its logits (n, V) into t. */
static gf_status other_process(const inv_target *tg, const char *exe, const char *dir, int idx, int32_t V, inv_trace *t)
{
    char out[4400], log[4400], threads[16], *toks = malloc((size_t)tg->n_probe * 12 + 1);
    if (!toks)
        return gf_error_set(GF_E_NOMEM, "invariance: out of memory");
    size_t tl = 0;
    for (int32_t i = 0; i < tg->n_probe; i++)
        tl += (size_t)sprintf(toks + tl, "%s%d", i ? "," : "", tg->probe[i]);
    snprintf(out, sizeof out, "%s/process%d.safetensors", dir, idx);
    snprintf(log, sizeof log, "%s/process%d.log", dir, idx);
    snprintf(threads, sizeof threads, "%d", tg->threads);
    char *argv[] = {(char *)exe,      "forward",   "--model", (char *)tg->model, "--tokens", toks, "--backend",
                    (char *)tg->spec, "--threads", threads,   "--out",           out,        NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int err = posix_spawn(&pid, exe, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    free(toks);
    if (err)
        return gf_error_set(GF_E_IO, "invariance: cannot start %s: %s", exe, strerror(err));
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        char tail[300] = "";
        FILE *f = fopen(log, "r");
        if (f) {
            char line[300];
            while (fgets(line, sizeof line, f))
                snprintf(tail, sizeof tail, "%s", line);
            fclose(f);
        }
        tail[strcspn(tail, "\n")] = '\0';
        return gf_error_set(WIFEXITED(ws) && WEXITSTATUS(ws) == 2 ? GF_E_INVALID_ARG : GF_E_BACKEND,
                            "invariance: process %d (%s forward --backend %s) %s %d: %s", idx, exe, tg->spec,
                            WIFEXITED(ws) ? "exited" : "died of signal", WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws),
                            tail);
    }
    gf_safetensors *sf = NULL;
    gf_status st = gf_safetensors_open(out, &sf);
    const gf_st_tensor *lt = st == GF_OK ? gf_safetensors_find(sf, "logits") : NULL;
    if (st == GF_OK && (!lt || gf_st_tensor_numel(lt) != (int64_t)tg->n_probe * V))
        st = gf_error_set(GF_E_FORMAT, "invariance: %s holds no (%d, %d) logits", out, tg->n_probe, V);
    if (st == GF_OK)
        st = trace_alloc(t, tg->n_probe, V);
    if (st == GF_OK)
        st = gf_st_tensor_to_f32(sf, lt, t->logits);
    for (int32_t i = 0; st == GF_OK && i < t->n; i++)
        t->tokens[i] = gf_row_top(t->logits + (size_t)i * V, V, NULL, NULL);
    gf_safetensors_close(sf);
    unlink(out);
    unlink(log);
    return st;
}

static gf_status axis_repeat(const inv_spec *s, const inv_target *tg, inv_result *r)
{
    gf_engine *e = tg->session->engine;
    const int32_t steps = (int32_t)s->steps, V = gf_engine_config(e)->vocab_size;
    snprintf(r->what, sizeof r->what,
             "the probe alone, greedy, %d steps, called %lld times; its uncached forward in "
             "%lld other processes",
             steps, s->repeats, s->processes);
    gf_status st = gen_in_batch(e, tg, 1, 0, steps, new_ref(r, "%s", "call 1"));
    for (long long i = 1; st == GF_OK && !stop(tg, r) && i < s->repeats; i++) {
        inv_variant *v = new_variant(r, 0, 0);
        if (!v)
            return gf_error_set(GF_E_NOMEM, "invariance: out of memory");
        snprintf(v->label, sizeof v->label, "call %lld of %lld", i + 1, s->repeats);
        st = gen_in_batch(e, tg, 1, 0, steps, &v->tr);
    }
    if (st != GF_OK || s->processes <= 0 || stop(tg, r))
        return st;
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[len > 0 ? len : 0] = '\0';
    const char *base = strrchr(exe, '/');
    if (len <= 0 || strncmp(base ? base + 1 : exe, "genfence", 8)) {
        snprintf(r->skipped, sizeof r->skipped,
                 "the other processes: this process is not the genfence binary (%.300s), whose `forward` they run",
                 exe[0] ? exe : "unknown");
        return GF_OK;
    }
    const int ref = r->n_refs;
    st = all_positions(e, 1, tg->probe, tg->n_probe, 0, new_ref(r, "%s", "this process, uncached, every position"));
    const char *tmp = getenv("TMPDIR");
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/genfence-invariance-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (st == GF_OK && !mkdtemp(dir))
        return gf_error_set(GF_E_IO, "invariance: cannot make a temporary directory under %s",
                            tmp && tmp[0] ? tmp : "/tmp");
    for (long long p = 1; st == GF_OK && !stop(tg, r) && p <= s->processes; p++) {
        inv_variant *v = new_variant(r, ref, 1);
        if (!v) {
            st = gf_error_set(GF_E_NOMEM, "invariance: out of memory");
            break;
        }
        snprintf(v->label, sizeof v->label, "process %lld of %lld (genfence forward)", p, s->processes);
        st = other_process(tg, exe, dir, (int)p, V, &v->tr);
    }
    rmdir(dir);
    return st;
}

static gf_status axis_prefix(const inv_spec *s, const inv_target *tg, inv_result *r)
{
    gf_engine *e = tg->session->engine;
    const int32_t V = gf_engine_config(e)->vocab_size, n = clamp_len(e, tg->n_probe, 1);
    const int32_t np = s->prefix > 0 ? (int32_t)s->prefix : n / 2;
    if (np < 1 || np >= n)
        return gf_error_set(GF_E_INVALID_ARG,
                            "invariance: prefix of %d tokens needs a probe of more tokens (it has %d)", np, n);
    int32_t *two = malloc((size_t)2 * n * sizeof *two); /* (2, n): prefix + continuation per row */
    int32_t *pos = malloc((size_t)n * sizeof *pos);
    void *cache = NULL;
    gf_status st = two && pos ? GF_OK : gf_error_set(GF_E_NOMEM, "invariance: out of memory");
    snprintf(r->what, sizeof r->what,
             "row 0 (a %d-token prefix + %d tokens) beside the same row, every position; its continuation after "
             "the prefix in a new cache",
             np, n - np);
    if (st == GF_OK) { /* 1. beside the same row vs beside the prefix + another continuation */
        memcpy(two, tg->probe, (size_t)n * sizeof *two);
        memcpy(two + n, tg->probe, (size_t)n * sizeof *two);
        st = all_positions(e, 2, two, n, 0, new_ref(r, "%s", "row 1 = row 0"));
    }
    inv_variant *v = st == GF_OK ? new_variant(r, 0, 1) : NULL;
    if (st == GF_OK && !v)
        st = gf_error_set(GF_E_NOMEM, "invariance: out of memory");
    if (st == GF_OK) {
        filler(tg->probe + np, n - np, 1, V, two + n + np);
        snprintf(v->label, sizeof v->label, "row 1 = the prefix + another continuation");
        st = all_positions(e, 2, two, n, 0, &v->tr);
    }
    /* 2. the continuation after the prefix: a new cache vs one reused after cache_reset */
    for (int32_t i = 0; st == GF_OK && i < n; i++)
        pos[i] = i;
    for (int reuse = 0; st == GF_OK && !stop(tg, r) && reuse < 2; reuse++) {
        inv_trace *t;
        if (!reuse) {
            t = new_ref(r, "%s", "a new cache: prefix, then the continuation");
        } else {
            v = new_variant(r, r->n_refs - 1, 1);
            if (!v) {
                st = gf_error_set(GF_E_NOMEM, "invariance: out of memory");
                break;
            }
            snprintf(v->label, sizeof v->label, "a cache reused after cache_reset (it held the other continuation)");
            t = &v->tr;
        }
        if (!cache)
            st = gf_engine_cache_create(e, 1, n, &cache);
        float *last = malloc((size_t)V * sizeof *last);                  /* (1, 1, V) */
        float *all = malloc((size_t)(n - np) * (size_t)V * sizeof *all); /* (1, n - np, V) */
        if (st == GF_OK && (!last || !all))
            st = gf_error_set(GF_E_NOMEM, "invariance: out of memory");
        if (st == GF_OK && reuse) /* empty it, fill it with the prefix + the other continuation, empty it again */
            st = gf_engine_cache_reset(e, cache);
        if (st == GF_OK && reuse) {
            gf_batch in = {.B = 1, .T = n, .tokens = two + n, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
            st = gf_engine_forward(e, cache, &in, last);
            if (st == GF_OK)
                st = gf_engine_cache_reset(e, cache);
        }
        gf_batch pre = {.B = 1, .T = np, .tokens = tg->probe, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
        gf_batch cont = {
            .B = 1, .T = n - np, .tokens = tg->probe + np, .position_ids = pos + np, .logits_mode = GF_LOGITS_ALL};
        if (st == GF_OK)
            st = gf_engine_forward(e, cache, &pre, last);
        if (st == GF_OK)
            st = gf_engine_forward(e, cache, &cont, all);
        if (st == GF_OK)
            st = trace_alloc(t, n - np, V);
        if (st == GF_OK) {
            memcpy(t->logits, all, (size_t)(n - np) * V * sizeof *all);
            for (int32_t i = 0; i < t->n; i++)
                t->tokens[i] = gf_row_top(t->logits + (size_t)i * V, V, NULL, NULL);
        }
        free(last);
        free(all);
    }
    gf_engine_cache_free(e, cache);
    free(two);
    free(pos);
    return st;
}

gf_status inv_measure(const inv_spec *s, const inv_target *tg, inv_result *r)
{
    memset(r, 0, sizeof *r);
    switch ((gf_inv_axis)s->axis) {
    case GF_INV_batch: return axis_batch(s, tg, r);
    case GF_INV_position: return axis_position(s, tg, r);
    case GF_INV_mixed: return axis_mixed(s, tg, r);
    case GF_INV_threads: return axis_threads(s, tg, r);
    case GF_INV_split: return axis_split(s, tg, r);
    case GF_INV_repeat: return axis_repeat(s, tg, r);
    case GF_INV_prefix: return axis_prefix(s, tg, r);
    default: return gf_error_set(GF_E_INVALID_ARG, "invariance: no axis %d", s->axis);
    }
}

/* ---- judging ---- */

static int same_tokens(const inv_trace *a, const inv_trace *b)
{
    return a->n == b->n && !memcmp(a->tokens, b->tokens, (size_t)a->n * sizeof *a->tokens);
}

gf_inv_level inv_judge(inv_result *r, const gf_gate *gate, gf_compute_dtype dtype, double atol, int *distinct)
{
    gf_inv_level worst = GF_INV_LEVEL_BITWISE;
    for (int i = 0; i < r->n; i++) {
        inv_variant *v = &r->v[i];
        const inv_trace *ref = &r->refs[v->ref], *t = &v->tr;
        const int32_t V = ref->V, n = ref->n < t->n ? ref->n : t->n;
        v->first_diff = -1;
        for (int32_t s = 0; s < n && v->first_diff < 0; s++)
            if (memcmp(ref->logits + (size_t)s * V, t->logits + (size_t)s * V, (size_t)V * sizeof(float)))
                v->first_diff = s;
        v->bitwise = ref->n == t->n && v->first_diff < 0;
        gf_cmp_init(&v->cmp, gate, dtype, v->teacher_forced ? GF_CMP_TEACHER_FORCED : GF_CMP_FREE_RUNNING, atol);
        for (int32_t s = 0; s < n && !gf_cmp_stopped(&v->cmp); s++) {
            const float *a = ref->logits + (size_t)s * V, *b = t->logits + (size_t)s * V;
            double top1, margin;
            gf_row_top(a, V, &top1, &margin);
            gf_cmp_step(&v->cmp, s, gf_max_abs_delta(a, b, (size_t)V, NULL), ref->tokens[s], t->tokens[s], margin,
                        top1);
        }
        v->max_delta = v->cmp.max_delta;
        v->level = v->bitwise                                                        ? GF_INV_LEVEL_BITWISE
                   : gf_cmp_verdict(&v->cmp, NULL, 0) != GF_V_FAIL && ref->n == t->n ? GF_INV_LEVEL_GATED
                                                                                     : GF_INV_LEVEL_NONE;
        if (v->level < worst)
            worst = v->level;
    }
    /* distinct completions: token sequences among the references and variants of each reference */
    int d = 0;
    for (int ref = 0; ref < r->n_refs; ref++) {
        int n_seen = 1; /* the reference's own */
        for (int i = 0; i < r->n; i++) {
            if (r->v[i].ref != ref)
                continue;
            int seen = same_tokens(&r->v[i].tr, &r->refs[ref]);
            for (int j = 0; j < i && !seen; j++)
                seen = r->v[j].ref == ref && same_tokens(&r->v[j].tr, &r->v[i].tr);
            n_seen += !seen;
        }
        d = n_seen > d ? n_seen : d;
    }
    *distinct = d;
    return worst;
}
