#define _XOPEN_SOURCE 700 /* nftw, mkdtemp */
#include "support_files.h"

#include <criterion/criterion.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static char g_dir[512];

void tf_tmpdir_make(const char *prefix)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix);
    cr_assert(mkdtemp(g_dir) != NULL, "mkdtemp %s failed", g_dir);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

void tf_tmpdir_remove(void) { nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

const char *tf_tmpdir(void) { return g_dir; }

const char *tf_path(const char *name)
{
    static char buf[8][640];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", g_dir, name);
    return p;
}
