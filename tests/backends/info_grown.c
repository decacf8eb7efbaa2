/* The ref backend built as a module from a newer genfence whose
 * gf_backend_info grew at its end (one more trailing field, the way ABI 2
 * added weights and kv_cache), for tests/unit/test_info_abi.c: this
 * genfence is the older host.
 *
 *   GF_INFO_GROWN=1  "ref-info-grown": follows "the callee fills at most the
 *                    caller's struct_size" (backend.h): it fills its grown
 *                    struct and copies min(caller's struct_size, its sizeof)
 *                    bytes, saying how many. The host's bytes after its
 *                    struct stay untouched.
 *   GF_INFO_GROWN=2  "ref-info-grown-past": the habit the rule replaced:
 *                    memset and struct_size of its own (grown) sizeof, then
 *                    the fields: it writes past the host's struct, which the
 *                    host's guard names (GF_E_BACKEND) instead of being
 *                    corrupted by it.
 */
#include <stddef.h>
#include <string.h>

#include "genfence/backend.h"
#include "ref/ref.h"

/* gf_backend_info as the newer header declares it: this one's fields, then one more */
typedef struct grown_info {
    gf_backend_info v2;
    const char *accelerator; /* the newer field */
} grown_info;
_Static_assert(offsetof(grown_info, accelerator) == sizeof(gf_backend_info), "grown at the end");

static gf_backend_ops g_ops;

static gf_status grown_info_slot(const gf_backend_options *opts, gf_backend_info *info_out)
{
    grown_info mine;
    memset(&mine, 0, sizeof mine);
    mine.v2.struct_size = sizeof mine;
    gf_status st = gf_backend_ref()->info(opts, &mine.v2); /* ref's fields, by the rule itself */
    if (st != GF_OK)
        return st;
    mine.v2.struct_size = sizeof mine;
    mine.v2.library = "ref behind a grown gf_backend_info";
    mine.accelerator = "none";
#if GF_INFO_GROWN == 1
    size_t n = info_out->struct_size < sizeof mine ? info_out->struct_size : sizeof mine;
    memcpy((unsigned char *)info_out + sizeof(uint32_t), (const unsigned char *)&mine + sizeof(uint32_t),
           n - sizeof(uint32_t));
    info_out->struct_size = (uint32_t)n;
#elif GF_INFO_GROWN == 2
    grown_info *g = (grown_info *)(void *)info_out; /* trusts its own sizeof */
    memset(g, 0, sizeof *g);
    *g = mine;
#else
#error "GF_INFO_GROWN must be 1 or 2"
#endif
    return GF_OK;
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    g_ops = *gf_backend_ref();
    g_ops.name = GF_INFO_GROWN == 1 ? "ref-info-grown" : "ref-info-grown-past";
    g_ops.description = "ref, its info built against a gf_backend_info one field longer than this genfence's";
    g_ops.info = grown_info_slot;
    return &g_ops;
}
