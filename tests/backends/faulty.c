/* The ref backend behind a wrapper with one fault, for the honest-verdict
 * tests (tests/cli/honest_backends.sh, cases/detect/). Unlike the
 * GF_REF_FAULT builds of backends/ref/ref.c, the fault sits in the table
 * around ref, so ref itself stays untouched:
 *
 *   GF_FAULT=1  "probe-crash": probe dereferences NULL (SIGSEGV)
 *   GF_FAULT=2  "probe-hang":  probe never returns
 *
 * Every other slot is ref's. Output: libgenfence_test_faulty_<stem>.so. */
#include <signal.h>
#include <stddef.h>
#include <string.h>
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
#else
    return gf_backend_ref()->probe(why, why_len);
#endif
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.name = GF_FAULT_NAME;
        g_ops.description = "ref with a fault (tests/backends/faulty.c)";
        g_ops.probe = faulty_probe;
    }
    return &g_ops;
}
