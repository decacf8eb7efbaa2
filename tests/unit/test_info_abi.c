/* "The callee fills at most the caller's struct_size" for gf_backend_info
 * (include/genfence/backend.h): a module built against a grown
 * gf_backend_info (tests/backends/info_grown.c, one trailing field more)
 * in this, older, host. The rule-following one leaves the bytes after the
 * host's struct untouched and says how many it filled; the one that writes
 * its own sizeof is named by gf_backend_describe's guard, not let loose on
 * the caller's struct. */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#include "genfence/backend.h"
#include "genfence/engine.h"
#include "ref/ref.h"

static const gf_backend_ops *load(const char *variant)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/backends/libgenfence_test_info_%s.so", GF_TEST_BINARY_DIR, variant);
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(dl, "%s", dlerror());
    void *sym = dlsym(dl, GF_BACKEND_ENTRY_SYMBOL);
    cr_assert_not_null(sym);
    gf_backend_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const gf_backend_ops *ops = entry();
    cr_assert_eq(gf_backend_check_ops(ops), GF_OK, "%s", gf_error_msg());
    return ops;
}

/* the host's struct with guard bytes after it */
typedef struct host_buf {
    gf_backend_info info;
    unsigned char after[64];
} host_buf;

static void call_info(const gf_backend_ops *ops, host_buf *b, uint32_t struct_size)
{
    memset(b, 0, sizeof *b);
    memset(b->after, 0xA5, sizeof b->after);
    b->info.struct_size = struct_size;
    gf_backend_options o = {.struct_size = sizeof o, .threads = 1};
    cr_assert_eq(ops->info(&o, &b->info), GF_OK);
}

static void after_untouched(const host_buf *b, size_t from)
{
    const unsigned char *p = (const unsigned char *)b;
    for (size_t i = from; i < sizeof *b; i++)
        cr_assert_eq(p[i], i >= offsetof(host_buf, after) ? 0xA5 : 0, "byte %zu after the host's %zu was written", i,
                     from);
}

Test(info_abi, grown_module_fills_at_most_the_host_struct)
{
    const gf_backend_ops *ops = load("grown");
    host_buf b;
    call_info(ops, &b, sizeof b.info);
    after_untouched(&b, sizeof b.info);
    cr_assert_eq(b.info.struct_size, sizeof b.info, "filled %u of the host's %zu", b.info.struct_size, sizeof b.info);
    cr_assert_eq(b.info.dtype, GF_COMPUTE_F32);
    cr_assert_str_eq(b.info.library, "ref behind a grown gf_backend_info");
    /* a host whose struct ends before weights (ABI 2's first cut) gets only that */
    const uint32_t old = (uint32_t)offsetof(gf_backend_info, weights);
    call_info(ops, &b, old);
    after_untouched(&b, old);
    cr_assert_eq(b.info.struct_size, old);
    cr_assert_null(b.info.weights);
    cr_assert_str_eq(b.info.library, "ref behind a grown gf_backend_info");
}

Test(info_abi, grown_module_through_the_engine)
{
    const gf_backend_ops *ops = load("grown");
    gf_backend_info info;
    gf_backend_options o = {.struct_size = sizeof o, .threads = 2};
    cr_assert_eq(gf_backend_describe(ops, &o, &info), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(info.struct_size, sizeof info);
    cr_assert_str_eq(info.library, "ref behind a grown gf_backend_info");
    cr_assert_eq(info.threads, 2);
}

Test(info_abi, writing_past_the_host_struct_is_named)
{
    const gf_backend_ops *ops = load("grown_past");
    gf_backend_info info;
    gf_backend_options o = {.struct_size = sizeof o, .threads = 1};
    gf_status st = gf_backend_describe(ops, &o, &info);
    cr_assert_eq(st, GF_E_BACKEND, "status %s", gf_status_str(st));
    cr_assert(strstr(gf_error_msg(), "backend 'ref-info-grown-past': info: wrote 8 bytes (8 bytes) past info_out"),
              "%s", gf_error_msg());
    /* the caller's struct holds the defaults, nothing of the backend's */
    cr_assert_eq(info.struct_size, sizeof info);
    cr_assert_eq(info.dtype, GF_COMPUTE_F32);
    cr_assert_null(info.library);
}

/* the shipped backends follow the rule too */
Test(info_abi, ref_fills_at_most_the_caller_struct)
{
    host_buf b;
    const uint32_t old = (uint32_t)offsetof(gf_backend_info, weights);
    call_info(gf_backend_ref(), &b, old);
    after_untouched(&b, old);
    cr_assert_eq(b.info.struct_size, old);
    call_info(gf_backend_ref(), &b, sizeof b.info);
    after_untouched(&b, sizeof b.info);
    cr_assert_eq(b.info.struct_size, sizeof b.info);
}
