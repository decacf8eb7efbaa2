/* exec_sample_check MODULE COMMAND: the exec adapter's sample slot, end to end.
 *
 * Opens the exec module (MODULE, e.g. build/backends/libgenfence_backend_exec.so),
 * asks info for COMMAND (which handshakes the client and, if its hello offers
 * a sampler, fills the table's sample slot), then draws tokens through the
 * slot with no model, as genfence's sampler-only cases do, and compares every
 * row with genfence's own gf_sample: greedy, temperature, top-k, top-p and
 * their mixes, over logits with ties and -inf entries, several seeds,
 * sequences and steps. Prints the tally; exit 0 iff every token is equal
 * (1 on a mismatch or an error, 2 on bad usage). The first 8 differences are
 * printed with both tokens' logits. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/backend.h"
#include "genfence/engine.h"
#include "genfence/sampler.h"

enum { B = 4, V = 96 };

static uint64_t g_state = 88172645463325252ull;
static double rnd(void) /* xorshift64*, in [0, 1) */
{
    g_state ^= g_state >> 12;
    g_state ^= g_state << 25;
    g_state ^= g_state >> 27;
    return (double)((g_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: exec_sample_check MODULE COMMAND\n");
        return 2;
    }
    void *dl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        fprintf(stderr, "exec_sample_check: %s\n", dlerror());
        return 2;
    }
    gf_backend_entry_fn entry;
    void *sym = dlsym(dl, GF_BACKEND_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry);
    const gf_backend_ops *ops = sym ? entry() : NULL;
    if (!ops) {
        fprintf(stderr, "exec_sample_check: %s has no backend table\n", argv[1]);
        return 2;
    }
    gf_backend_options o = {.struct_size = sizeof o, .threads = 1, .config = argv[2]};
    gf_backend_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info; /* info fills at most this (backend.h) */
    if (ops->info(&o, &info) != GF_OK) {
        fprintf(stderr, "exec_sample_check: info: %s\n", ops->last_error ? ops->last_error(NULL) : "?");
        return 1;
    }
    if (!ops->sample) {
        printf("exec_sample_check: no sample slot after info (the client offers no sampler)\n");
        return 1;
    }
    const struct {
        double t;
        int uk, k, up;
        double p;
    } grid[] = {
        {0.0, 0, 0, 0, 1.0},   {0.8, 0, 0, 0, 1.0}, {1.5, 1, 5, 0, 1.0},  {0.7, 0, 0, 1, 0.9},
        {0.8, 1, 40, 1, 0.95}, {1.0, 1, 1, 0, 1.0}, {1.0, 0, 0, 1, 1e-6}, {2.0, 1, 200, 1, 0.5},
    };
    static float logits[B * V];
    const uint64_t seq_ids[B] = {0, 1, 7, 1u << 20};
    long calls = 0, rows = 0, mismatches = 0;
    for (int trial = 0; trial < 6; trial++) {
        for (int i = 0; i < B * V; i++) {
            double g = 0;
            for (int k = 0; k < 4; k++)
                g += rnd() - 0.5;
            logits[i] = (float)(3.0 * g);
            if (trial % 2 && rnd() < 0.1)
                logits[i] = -INFINITY; /* masked vocabulary entries */
            if (trial == 4 && i % V > 0 && rnd() < 0.3)
                logits[i] = logits[i - 1]; /* ties */
        }
        for (size_t gi = 0; gi < sizeof grid / sizeof grid[0]; gi++)
            for (uint64_t seed = 0; seed < 2; seed++)
                for (uint64_t step = 0; step < 3; step++) {
                    gf_sampler_params p = {.temperature = grid[gi].t,
                                           .use_top_k = grid[gi].uk,
                                           .top_k = grid[gi].k,
                                           .use_top_p = grid[gi].up,
                                           .top_p = grid[gi].p,
                                           .seed = seed * 1337};
                    int32_t ids[B];
                    gf_status st = gf_backend_sample(ops, NULL, logits, B, V, &p, seq_ids, step, ids);
                    calls++;
                    if (st != GF_OK) {
                        printf("exec_sample_check: call %ld: %s\n", calls, gf_error_msg());
                        return 1;
                    }
                    for (int b = 0; b < B; b++) {
                        gf_sample_result r;
                        if (gf_sample(logits + (size_t)b * V, V, &p, seq_ids[b], step, &r) != GF_OK)
                            return 1;
                        rows++;
                        if (r.token != ids[b] && mismatches++ < 8)
                            printf("exec_sample_check: difference: trial %d, T %g, top-k %d/%d, top-p %d/%g, "
                                   "seed %llu, step %llu, row %d: slot %d, engine %d\n",
                                   trial, p.temperature, p.use_top_k, p.top_k, p.use_top_p, p.top_p,
                                   (unsigned long long)p.seed, (unsigned long long)step, b, ids[b], r.token);
                        if (r.token != ids[b] && mismatches <= 8)
                            printf("    slot's logit %.9g, engine's %.9g\n", logits[(size_t)b * V + ids[b]],
                                   logits[(size_t)b * V + r.token]);
                    }
                }
    }
    printf("exec_sample_check: %ld calls, %ld rows, %ld mismatches (client: %s)\n", calls, rows, mismatches,
           info.detail ? info.detail : "?");
    return mismatches ? 1 : 0;
}
