/* Each pool child's own scratch folder: the parent makes it before the fork
 * ($TMPDIR/genfence-child-XXXXXX), the child runs with TMPDIR pointing at it,
 * and the parent removes it once the child is reaped, however the child
 * ended. A kind or a backend that writes temporary files (a probe's
 * micro-model, an exec client's sockets) then leaves nothing behind when the
 * watchdog kills it mid-call, which cleanup code in the child itself cannot
 * promise (SIGKILL runs none). */
#define _GNU_SOURCE
#include "pool.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gf_pool_scratch_make(char *dir, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    if (snprintf(dir, cap, "%s/genfence-child-XXXXXX", tmp && tmp[0] ? tmp : "/tmp") >= (int)cap || !mkdtemp(dir)) {
        dir[0] = '\0'; /* the child keeps the caller's TMPDIR */
        return 0;
    }
    return 1;
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path); /* best effort: what cannot go stays, nothing fails for it */
    return 0;
}

void gf_pool_scratch_remove(char *dir)
{
    if (!dir[0])
        return;
    /* depth first, never following a link out of the folder */
    nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    dir[0] = '\0';
}
