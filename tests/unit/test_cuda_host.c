/* The CUDA backend's host side that needs no model, on a machine without a
 * GPU (backends/cuda/README.md):
 *   - the option (compute type) and the dtype each declares;
 *   - the F32 -> bfloat16 / half rounding the uploads and the GEMM inputs use;
 *   - the sampler of cuda_forward.c run through the host twin executor (the
 *     device kernel's body on the CPU) against gf_sample, token for token;
 *   - the built module itself where this build has it: probe's CUDA text,
 *     info's dtype per option, an unknown option refused in model_load.
 * test_cuda_model.c has the layout, the forward pass and the cache. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../backends/cuda/cuda_exec_host.c"
#include "../../backends/cuda/cuda_forward.c"
#include "../../backends/cuda/cuda_pack.c"
#include "genfence/sampler.h"
#include "ref/ref.h"
#include "support_tiny_model.h"

/* ---- the option ---- */

Test(cuda_host, options_and_dtypes)
{
    static const struct {
        const char *cfg;
        gfc_mode mode;
        gf_compute_dtype dt;
        size_t bytes;
    } ok[] = {{NULL, GFC_FP32, GF_COMPUTE_F32, 4},
              {"fp32", GFC_FP32, GF_COMPUTE_F32, 4},
              {"tf32", GFC_TF32, GF_COMPUTE_TF32, 4},
              {"bf16", GFC_BF16, GF_COMPUTE_BF16, 2},
              {"fp16", GFC_FP16, GF_COMPUTE_F16, 2}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        gfc_mode m = (gfc_mode)99;
        cr_assert_eq(gfc_parse_config(ok[i].cfg, &m), GF_OK, "%s", ok[i].cfg ? ok[i].cfg : "NULL");
        cr_assert_eq(m, ok[i].mode);
        cr_assert_eq(gfc_mode_dtype(m), ok[i].dt);
        cr_assert_eq(gfc_mode_gemm_bytes(m), ok[i].bytes);
    }
    const char *bad[] = {"bogus", "", "FP32", "tf32 ", "bf16,fp16", "fp8"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gfc_mode m;
        cr_assert_eq(gfc_parse_config(bad[i], &m), GF_E_INVALID_ARG, "'%s' accepted", bad[i]);
        char want[64];
        snprintf(want, sizeof want, "'cuda:%s'", bad[i]);
        cr_assert(strstr(gf_error_msg(), want), "message does not name the option: %s", gf_error_msg());
    }
    cr_assert_str_eq(gfc_mode_name(GFC_TF32), "tf32");
}

/* ---- rounding ---- */

Test(cuda_host, bf16_rounding)
{
    static const struct {
        uint32_t in;
        uint16_t out;
    } cases[] = {
        {0x3f800000u, 0x3f80}, {0x3f808000u, 0x3f80}, /* tie -> even */
        {0x3f818000u, 0x3f82}, {0x3f808001u, 0x3f81}, {0x3f807fffu, 0x3f80}, {0x80000000u, 0x8000},
        {0x7f7fffffu, 0x7f80}, /* max float rounds to inf */
        {0xff800000u, 0xff80}, {0x00000001u, 0x0000}, {0x00008000u, 0x0000}, {0x00018000u, 0x0002},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_eq(gfc_f32_to_bf16(gfc_float(cases[i].in)), cases[i].out, "0x%08x -> 0x%04x, want 0x%04x",
                     cases[i].in, gfc_f32_to_bf16(gfc_float(cases[i].in)), cases[i].out);
    cr_assert(isnan(gfc_bf16_to_f32(gfc_f32_to_bf16(NAN))));
    cr_assert(isnan(gfc_bf16_to_f32(gfc_f32_to_bf16(gfc_float(0x7f800001u))))); /* low-bit NaN stays NaN */
    /* nearest: no bf16 neighbour of the result is closer */
    for (uint32_t k = 0; k < 200000; k++) {
        uint32_t u = k * 2654435761u;
        float x = gfc_float(u);
        if (!isfinite(x) || fabsf(x) > 3e38f)
            continue;
        uint16_t h = gfc_f32_to_bf16(x);
        double r = gfc_bf16_to_f32(h), up = gfc_bf16_to_f32((uint16_t)(h + 1)), dn = gfc_bf16_to_f32((uint16_t)(h - 1));
        double d = fabs(r - x);
        /* a NaN neighbour (past +-0 or inf) is never closer */
        cr_assert(!(fabs(up - x) < d) && !(fabs(dn - x) < d), "0x%08x -> 0x%04x not nearest", u, h);
    }
}

Test(cuda_host, f16_rounding_matches_the_compiler)
{
    /* GCC's _Float16 conversion is IEEE round-to-nearest-even */
    for (uint32_t k = 0; k < 400000; k++) {
        uint32_t u = k * 2654435761u ^ (k >> 3);
        if (k < 65536) /* every half value and its midpoints, exactly */
            u = gfc_bits((float)(_Float16)gfc_f16_to_f32((uint16_t)k)) + (k & 1 ? 0x1000u : 0);
        float x = gfc_float(u);
        if (isnan(x))
            continue;
        _Float16 want = (_Float16)x;
        uint16_t wb;
        memcpy(&wb, &want, sizeof wb);
        cr_assert_eq(gfc_f32_to_f16(x), wb, "0x%08x (%g) -> 0x%04x, want 0x%04x", u, (double)x, gfc_f32_to_f16(x), wb);
        cr_assert_eq(gfc_bits(gfc_f16_to_f32(wb)), gfc_bits((float)want), "0x%04x back", wb);
    }
    cr_assert_eq(gfc_f32_to_f16(65519.0f), 0x7bff);
    cr_assert_eq(gfc_f32_to_f16(65520.0f), 0x7c00);
    cr_assert_eq(gfc_f32_to_f16(gfc_float(0x33000000u)), 0x0000); /* 2^-25: tie to even 0 */
    cr_assert_eq(gfc_f32_to_f16(gfc_float(0x33000001u)), 0x0001);
    cr_assert(isnan(gfc_f16_to_f32(gfc_f32_to_f16(NAN))));
}

/* ---- the sampler: the device's algorithm, token for token with gf_sample ---- */

Test(cuda_host, sampler_matches_gf_sample)
{
    enum { B = 4, VMAX = 70 };
    const uint64_t seq[B] = {0, 3, 1u << 20, 77};
    static const struct {
        double temp;
        int use_k, k, use_p;
        double p;
    } params[] = {{0, 0, 0, 0, 1},      {1.0, 0, 0, 0, 1}, {0.7, 1, 5, 0, 1},      {1.3, 0, 0, 1, 0.9},
                  {0.9, 1, 12, 1, 0.5}, {2.0, 1, 1, 0, 1}, {1.0, 1, 200, 1, 0.95}, {0.5, 0, 0, 1, 1.0},
                  {1.0, 1, 3, 1, 0.2},  {0, 1, 2, 1, 0.3}};
    const int32_t Vs[] = {1, 2, 37, VMAX};
    int checked = 0;
    for (size_t vi = 0; vi < sizeof Vs / sizeof Vs[0]; vi++)
        for (int shape = 0; shape < 3; shape++) /* smooth, ties, -inf holes */
            for (size_t pi = 0; pi < sizeof params / sizeof params[0]; pi++)
                for (uint64_t step = 0; step < 6; step++) {
                    const int32_t V = Vs[vi];
                    gf_sampler_params p = {.temperature = params[pi].temp,
                                           .use_top_k = params[pi].use_k,
                                           .top_k = params[pi].k,
                                           .use_top_p = params[pi].use_p,
                                           .top_p = params[pi].p,
                                           .seed = 1234 + step};
                    float lg[B * VMAX];
                    double u[B * VMAX];
                    for (int b = 0; b < B; b++) {
                        for (int32_t i = 0; i < V; i++) {
                            double r = gf_rng_uniform(55 + step, seq[b], pi * 7 + vi, (uint32_t)i);
                            float x = (float)(6.0 * r - 3.0);
                            if (shape == 1)
                                x = (float)floor(4.0 * r); /* many exact ties */
                            if (shape == 2 && i % 3 == 1 && V > 2)
                                x = -INFINITY;
                            lg[b * V + i] = x;
                        }
                        gf_rng_uniforms(p.seed, seq[b], step, V, u + (size_t)b * V);
                    }
                    gfc_host_exec hx;
                    gfc_host_exec_init(&hx, GFC_FP32);
                    int32_t ids[B];
                    cr_assert_eq(gfc_sample(&hx.base, lg, B, V, &p, u, ids), GF_OK, "%s", gf_error_msg());
                    cr_assert_eq(hx.live, 0);
                    for (int b = 0; b < B; b++) {
                        gf_sample_result r;
                        cr_assert_eq(gf_sample(lg + (size_t)b * V, V, &p, seq[b], step, &r), GF_OK);
                        cr_assert_eq(ids[b], r.token, "V %d shape %d params %zu step %llu row %d: %d, gf_sample %d", V,
                                     shape, pi, (unsigned long long)step, b, ids[b], r.token);
                        checked++;
                    }
                }
    cr_assert_eq(checked, 4 * 3 * 10 * 6 * B);
}

/* ---- the built module (where this build has one) ---- */

static const gf_backend_ops *open_module(void **dl)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/backends/libgenfence_backend_cuda.so", GF_TEST_BINARY_DIR);
    *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*dl) {
        /* cr_log_info, not warn: Criterion 2.4.1 exits 1 on any warning */
        cr_log_info("no cuda module to check (%s)", dlerror());
        return NULL;
    }
    gf_backend_entry_fn entry;
    void *sym = dlsym(*dl, GF_BACKEND_ENTRY_SYMBOL);
    cr_assert_not_null(sym);
    memcpy(&entry, &sym, sizeof entry);
    return entry();
}

Test(cuda_host, module_probe_info_and_options)
{
    void *dl;
    const gf_backend_ops *ops = open_module(&dl);
    if (!ops) {
        /* A build that made the module must be able to open it; one that did
         * not (GENFENCE_WITH_CUDA=OFF, sanitizer builds, no nvcc) skips. */
        cr_assert(!GF_TEST_HAVE_CUDA_MODULE, "the build made the cuda module, but it cannot be opened");
        cr_skip_test("the cuda module is not built in this configuration");
    }
    cr_assert_eq(gf_backend_check_ops(ops), GF_OK);
    cr_assert_str_eq(ops->name, "cuda");
    cr_assert_not_null(ops->sample);
    char why[512];
    gf_status pst = ops->probe(why, sizeof why);
    cr_assert(pst == GF_OK || pst == GF_E_UNAVAILABLE);
    if (pst == GF_E_UNAVAILABLE)
        cr_assert(!strncmp(why, "cuda: ", 6) && strlen(why) > 10, "probe gave '%s'", why);
    else
        cr_assert_str_empty(why);
    static const struct {
        const char *cfg;
        gf_compute_dtype dt;
        const char *detail;
    } modes[] = {{NULL, GF_COMPUTE_F32, "CUBLAS_COMPUTE_32F,"},
                 {"tf32", GF_COMPUTE_TF32, "FAST_TF32"},
                 {"bf16", GF_COMPUTE_BF16, "bfloat16"},
                 {"fp16", GF_COMPUTE_F16, "half"}};
    for (size_t i = 0; i < 4; i++) {
        gf_backend_options o = {.struct_size = sizeof o, .threads = 3, .config = modes[i].cfg};
        gf_backend_info info = {.struct_size = sizeof info};
        cr_assert_eq(ops->info(&o, &info), GF_OK);
        cr_assert_eq(info.dtype, modes[i].dt, "%s", modes[i].cfg ? modes[i].cfg : "default");
        cr_assert(strstr(info.library, "cuBLAS"), "%s", info.library);
        cr_assert(strstr(info.detail, modes[i].detail), "%s", info.detail);
    }
    /* an unknown option: refused by info and by model_load, named */
    tiny_model tm;
    tiny_model_make(&tm, 40, 32, 16, 2, 2, 7);
    gf_backend_options o = {.struct_size = sizeof o, .threads = 1, .config = "int8"};
    gf_backend_info info = {.struct_size = sizeof info};
    cr_assert_eq(ops->info(&o, &info), GF_E_INVALID_ARG);
    void *model = (void *)1;
    cr_assert_eq(ops->model_load(&tm.desc, &o, &model), GF_E_INVALID_ARG);
    cr_assert_null(model);
    cr_assert(strstr(ops->last_error(NULL), "'cuda:int8'"), "%s", ops->last_error(NULL));
    /* without a device: model_load and the model-less sampler say why */
    if (pst == GF_E_UNAVAILABLE) {
        o.config = "bf16";
        cr_assert_eq(ops->model_load(&tm.desc, &o, &model), GF_E_UNAVAILABLE);
        cr_assert_str_eq(ops->last_error(NULL), why);
        float lg[2] = {0, 1};
        double u[2] = {0.5, 0.5};
        gf_rng_draws d = {.u = u, .V = 2};
        gf_sampler_params sp = gf_sampler_greedy();
        int32_t id;
        cr_assert_eq(ops->sample(NULL, lg, 1, &sp, &d, &id), GF_E_UNAVAILABLE);
    }
    gf_sampler_params sp = gf_sampler_greedy();
    int32_t id;
    cr_assert_eq(ops->sample(NULL, NULL, 1, &sp, NULL, &id), GF_E_INVALID_ARG);
    tiny_model_free(&tm);
    dlclose(dl);
}
