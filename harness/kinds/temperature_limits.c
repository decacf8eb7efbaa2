/* temperature_limits: cold is one-hot, hot is uniform, greedy is argmax. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "genfence/sampler.h"
#include "keys.h"
#include "slot.h"

typedef struct temp_spec {
    double *logits; /* (rows, V) */
    size_t rows, V;
    int random;
    long long r_rows, r_vocab, r_seed;
    double r_scale, r_margin;
    double cold_t, cold_min, hot_t, hot_spread;
    int greedy;
    long long seed; /* for the cold draw */
} temp_spec;

static void temp_free(void *p)
{
    temp_spec *s = p;
    if (s)
        free(s->logits);
    free(s);
}

static int parse_temp(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    temp_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->cold_t = 1e-3;
    s->cold_min = 0.999;
    s->hot_t = 1e3;
    s->hot_spread = 1e-2;
    s->greedy = 1;
    s->seed = 35;
    s->r_rows = 3;
    s->r_vocab = 512;
    s->r_seed = 35;
    s->r_scale = 3.0;
    s->r_margin = 1.0;
    int bad = 0;
    int rl = gf_y_matrix(ctx, m, "logits", 0, 1, &s->logits, &s->rows, &s->V);
    bad |= rl < 0;
    const gf_ynode *r = gf_y_get(ctx, m, "random", 0);
    if (r && rl > 0) {
        gf_y_error(ctx, r, "give 'logits' or 'random', not both");
        bad = 1;
    } else if (r) {
        if (!gf_y_node_is_map(ctx, r, "'random'"))
            return -1;
        s->random = 1;
        bad |= gf_y_int(ctx, r, "rows", 0, 1, 4096, &s->r_rows) < 0;
        bad |= gf_y_int(ctx, r, "vocab", 0, 2, 1 << 20, &s->r_vocab) < 0;
        bad |= gf_y_int(ctx, r, "seed", 0, 0, 0x7fffffffffffffffLL, &s->r_seed) < 0;
        bad |= gf_y_double(ctx, r, "scale", 0, &s->r_scale) < 0;
        bad |= gf_y_double(ctx, r, "margin", 0, &s->r_margin) < 0;
        gf_y_check_unknown(ctx, r, "in 'random' (known: rows, vocab, seed, scale, margin)");
        s->seed = s->r_seed;
    } else if (rl == 0) {
        gf_y_error(ctx, m, "missing required key 'logits' or 'random'");
        bad = 1;
    }
    const gf_ynode *cold = gf_y_get(ctx, m, "cold", 0);
    if (cold && gf_y_node_is_map(ctx, cold, "'cold'")) {
        bad |= gf_y_double(ctx, cold, "temperature", 0, &s->cold_t) < 0;
        bad |= gf_y_double(ctx, cold, "min_max_prob", 0, &s->cold_min) < 0;
        gf_y_check_unknown(ctx, cold, "in 'cold' (known: temperature, min_max_prob)");
    } else if (cold) {
        bad = 1;
    }
    const gf_ynode *hot = gf_y_get(ctx, m, "hot", 0);
    if (hot && gf_y_node_is_map(ctx, hot, "'hot'")) {
        bad |= gf_y_double(ctx, hot, "temperature", 0, &s->hot_t) < 0;
        bad |= gf_y_double(ctx, hot, "max_spread", 0, &s->hot_spread) < 0;
        gf_y_check_unknown(ctx, hot, "in 'hot' (known: temperature, max_spread)");
    } else if (hot) {
        bad = 1;
    }
    bad |= gf_y_bool(ctx, m, "greedy", 0, &s->greedy) < 0;
    bad |= gf_y_int(ctx, m, "seed", 0, 0, 0x7fffffffffffffffLL, &s->seed) < 0;
    return bad ? -1 : 0;
}

static void run_temp(const gf_case *c, gf_krun *k)
{
    const temp_spec *s = c->spec;
    gf_k_note_sampler(k);
    size_t R = s->random ? (size_t)s->r_rows : s->rows, V = s->random ? (size_t)s->r_vocab : s->V;
    float *L = malloc(R * V * sizeof *L);
    double *pr = malloc(V * sizeof *pr);
    double *nrm = s->random ? malloc(R * V * sizeof *nrm) : NULL;
    if (!L || !pr || (s->random && !nrm)) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    if (s->random) {
        gf_k_seed(k, "random", (uint64_t)s->r_seed);
        gf_k_normals((uint64_t)s->r_seed, 0, nrm, R * V);
        for (size_t i = 0; i < R * V; i++)
            L[i] = (float)(nrm[i] * s->r_scale);
        for (size_t r = 0; r < R; r++) { /* a clear winner: its margin grows by `margin` */
            int32_t top = gf_row_top(L + r * V, (int32_t)V, NULL, NULL);
            L[r * V + top] += (float)s->r_margin;
        }
    } else {
        for (size_t i = 0; i < R * V; i++)
            L[i] = (float)s->logits[i];
    }
    gf_k_seed(k, "draw", (uint64_t)s->seed);
    double cold_worst = INFINITY, hot_worst = 0, min_margin = INFINITY;
    int cold_ok = 1, hot_ok = 1, greedy_ok = 1, cold_draw_ok = 1;
    char cold_msg[256] = "", hot_msg[256] = "", gmsg[256] = "", dmsg[256] = "";
    for (size_t r = 0; r < R; r++) {
        const float *row = L + r * V;
        double top1, margin;
        int32_t am = gf_row_top(row, (int32_t)V, &top1, &margin);
        if (margin < min_margin)
            min_margin = margin;
        gf_sampler_params p = gf_sampler_greedy();
        p.seed = (uint64_t)s->seed;
        p.temperature = s->cold_t;
        gf_status st = gf_sampler_probs(row, (int32_t)V, &p, pr);
        if (st != GF_OK) {
            gf_k_error(k, "cold temperature %g: %s", s->cold_t, gf_error_msg());
            goto done;
        }
        double mx = 0;
        for (size_t i = 0; i < V; i++)
            mx = pr[i] > mx ? pr[i] : mx;
        if (mx < cold_worst)
            cold_worst = mx;
        if (!(mx > s->cold_min) && cold_ok) {
            cold_ok = 0;
            snprintf(cold_msg, sizeof cold_msg, "row %zu: max prob %.9g <= %g", r, mx, s->cold_min);
        }
        p.temperature = s->hot_t;
        st = gf_sampler_probs(row, (int32_t)V, &p, pr);
        if (st != GF_OK) {
            gf_k_error(k, "hot temperature %g: %s", s->hot_t, gf_error_msg());
            goto done;
        }
        double hi = 0, lo = 1;
        for (size_t i = 0; i < V; i++) {
            hi = pr[i] > hi ? pr[i] : hi;
            lo = pr[i] < lo ? pr[i] : lo;
        }
        if (hi - lo > hot_worst)
            hot_worst = hi - lo;
        if (!(hi - lo < s->hot_spread) && hot_ok) {
            hot_ok = 0;
            snprintf(hot_msg, sizeof hot_msg, "row %zu: spread %.3g >= %g", r, hi - lo, s->hot_spread);
        }
        if (s->greedy) {
            gf_sample_result g, d;
            p.temperature = 0;
            st = gf_sample(row, (int32_t)V, &p, r, 0, &g);
            if (st != GF_OK || g.token != am) {
                if (greedy_ok)
                    snprintf(gmsg, sizeof gmsg, "row %zu: greedy gave %d, argmax %d%s%s", r, st == GF_OK ? g.token : -1,
                             am, st == GF_OK ? "" : ": ", st == GF_OK ? "" : gf_error_msg());
                greedy_ok = 0;
            }
            if (st == GF_OK) {
                const uint64_t seq = r;
                gf_k_slot_rows(k, "greedy", row, 1, (int32_t)V, &p, &seq, 0, &g.token);
            }
            p.temperature = s->cold_t;
            st = gf_sample(row, (int32_t)V, &p, r, 0, &d);
            if (st != GF_OK || d.token != am) {
                if (cold_draw_ok)
                    snprintf(dmsg, sizeof dmsg, "row %zu: cold draw gave %d, greedy %d", r, st == GF_OK ? d.token : -1,
                             am);
                cold_draw_ok = 0;
            }
            if (st == GF_OK) {
                const uint64_t seq = r;
                gf_k_slot_rows(k, "cold draw", row, 1, (int32_t)V, &p, &seq, 0, &d.token);
            }
        }
        if (k->sample_ops) { /* a hot draw too: near uniform, so any of V tokens */
            gf_sample_result h;
            p.temperature = s->hot_t;
            if (gf_sample(row, (int32_t)V, &p, r, 0, &h) == GF_OK) {
                const uint64_t seq = r;
                gf_k_slot_rows(k, "hot draw", row, 1, (int32_t)V, &p, &seq, 0, &h.token);
            }
        }
    }
    gf_k_check(k, cold_ok, "cold is near one-hot", "%s", cold_ok ? "every row's max prob above the bound" : cold_msg);
    gf_k_check(k, hot_ok, "hot is near uniform", "%s", hot_ok ? "every row's spread below the bound" : hot_msg);
    if (s->greedy) {
        gf_k_check(k, greedy_ok, "greedy equals argmax", "%s", greedy_ok ? "every row" : gmsg);
        gf_k_check(k, cold_draw_ok, "cold draw equals greedy", "%s", cold_draw_ok ? "every row" : dmsg);
    }
    gf_k_metric(k, "cold_min_max_prob", cold_worst);
    gf_k_metric(k, "hot_max_spread", hot_worst);
    gf_k_metric(k, "min_margin", min_margin);
    gf_k_metric_int(k, "rows", (long long)R);
    gf_k_metric_int(k, "vocab", (long long)V);
done:
    free(L);
    free(pr);
    free(nrm);
}

const gf_kind_def gf_kind_temperature_limits = {
    .name = "temperature_limits",
    .summary = "cold is one-hot, hot is uniform, greedy is argmax and equals a cold draw",
    .needs = GF_KIND_NEEDS_NOTHING,
    .reaches = GF_KIND_REACHES_SAMPLE,
    .parse = parse_temp,
    .free_spec = temp_free,
    .run = run_temp,
};
