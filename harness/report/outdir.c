/* The report directory of one run (report.h, docs/harness.md "Reports"):
 * locked for the run, the new report staged beside the old one and moved
 * into place only once complete. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "genfence/util.h"
#include "report.h"

#define STAGE_PREFIX ".staging."

static int g_lock_fd = -1; /* closed in forked children (atfork): a stray child must not hold the lock */

static void close_lock_in_child(void)
{
    if (g_lock_fd >= 0) {
        close(g_lock_fd);
        g_lock_fd = -1;
    }
}

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb, (void)ftw;
    return type == FTW_DP ? rmdir(path) : unlink(path);
}

/* rm -rf path (no symlink followed) */
static void rm_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return;
    if (!S_ISDIR(sb.st_mode)) {
        unlink(path);
        return;
    }
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* mkdir -p: the folder and any missing parents (GenfenceSuite.cmake gives
 * each test DIR/SUITE/ID@BACKEND). */
int gf_report_mkdir_p(const char *dir)
{
    char *p = strdup(dir);
    if (!p) {
        errno = ENOMEM;
        return -1;
    }
    for (char *q = p + 1; *q; q++)
        if (*q == '/') {
            *q = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                free(p);
                return -1;
            }
            *q = '/';
        }
    int rc = mkdir(p, 0777) != 0 && errno != EEXIST ? -1 : 0;
    int e = errno;
    free(p);
    errno = e;
    return rc;
}

/* Staging folders of runs that were killed (SIGKILL: no handler ran); the
 * lock is ours, so no run is using them. */
static void remove_stale_stages(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, STAGE_PREFIX, strlen(STAGE_PREFIX))) {
            char *p = gf_path_join(dir, e->d_name);
            if (p)
                rm_tree(p);
            free(p);
        }
    closedir(d);
}

int gf_report_dir_open(gf_report_dir *d, const char *dir, char *why, size_t why_cap)
{
    memset(d, 0, sizeof *d);
    d->lock_fd = -1;
    why[0] = '\0';
    if (gf_report_mkdir_p(dir) != 0) {
        snprintf(why, why_cap, "cannot create the report directory %s: %s", dir, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(why, why_cap, "the report directory %s is not a directory", dir);
        return -1;
    }
    char *lock = gf_path_join(dir, ".lock");
    int fd = lock ? open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666) : -1;
    if (fd < 0) {
        snprintf(why, why_cap, "cannot open %s/.lock: %s", dir, strerror(lock ? errno : ENOMEM));
        free(lock);
        return -1;
    }
    free(lock);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        close(fd);
        if (e == EWOULDBLOCK)
            snprintf(why, why_cap,
                     "the report directory %s is in use by another genfence run%s%s%s; wait for it to end, or pass "
                     "another --report-dir (or --no-report)",
                     dir, pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "");
        else
            snprintf(why, why_cap, "cannot lock %s/.lock: %s", dir, strerror(e));
        return -1;
    }
    char pid[32];
    int pn = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)pn, 0) != pn) {
        /* only a hint for the message above */
    }
    remove_stale_stages(dir);
    char name[64];
    snprintf(name, sizeof name, STAGE_PREFIX "%ld", (long)getpid());
    d->dir = strdup(dir);
    d->stage = gf_path_join(dir, name);
    if (!d->dir || !d->stage || mkdir(d->stage, 0777) != 0) {
        snprintf(why, why_cap, "cannot create %s/%s: %s", dir, name, strerror(d->stage ? errno : ENOMEM));
        close(fd);
        free(d->dir);
        free(d->stage);
        memset(d, 0, sizeof *d);
        d->lock_fd = -1;
        return -1;
    }
    char *failures = gf_path_join(d->stage, "failures"); /* always: the old failures/ is replaced even by none */
    if (failures)
        mkdir(failures, 0777);
    free(failures);
    d->lock_fd = fd;
    g_lock_fd = fd;
    static int atfork_done;
    if (!atfork_done && pthread_atfork(NULL, NULL, close_lock_in_child) == 0)
        atfork_done = 1;
    return 0;
}

static volatile sig_atomic_t g_signal;
static void on_signal(int sig)
{
    if (!g_signal)
        g_signal = sig;
}

void gf_report_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int gf_report_signal_seen(void) { return (int)g_signal; }

const char *gf_report_signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "signal";
}

/* "STAGE/x" -> "DIR/x" in a string, or NULL when it is not under STAGE. */
static char *rebased(const gf_report_dir *d, const char *s)
{
    size_t n = strlen(d->stage);
    if (strncmp(s, d->stage, n) || s[n] != '/')
        return NULL;
    return gf_path_join(d->dir, s + n + 1);
}

void gf_report_dir_rebase(const gf_report_dir *d, gf_job *jobs, size_t n_jobs)
{
    if (!d->stage)
        return;
    for (size_t i = 0; i < n_jobs; i++) {
        json_t *arts = jobs[i].record ? json_object_get(jobs[i].record, "artifacts") : NULL;
        size_t k;
        json_t *a;
        json_array_foreach(arts, k, a)
        {
            json_t *holder = json_is_object(a) ? a : NULL;
            const char *s = json_string_value(holder ? json_object_get(a, "path") : a);
            char *r = s ? rebased(d, s) : NULL;
            if (!r)
                continue;
            if (holder)
                json_object_set_new(holder, "path", json_string(r));
            else
                json_array_set_new(arts, k, json_string(r));
            free(r);
        }
    }
}

/* Move STAGE/name over DIR/name (rename replaces a file atomically; a
 * folder is exchanged with the old one, which is left in STAGE). */
static int put_in_place(const gf_report_dir *d, const char *name, int is_dir)
{
    char *from = gf_path_join(d->stage, name), *to = gf_path_join(d->dir, name);
    int rc = -1;
    struct stat sb;
    if (!from || !to)
        errno = ENOMEM;
    else if (lstat(from, &sb) != 0)
        rc = errno == ENOENT ? 0 : -1; /* this run did not write it */
    else if (!is_dir || lstat(to, &sb) != 0)
        rc = rename(from, to);
    else if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE) == 0)
        rc = 0;
    else if (errno == EINVAL || errno == ENOSYS) { /* no exchange on this filesystem: two renames */
        char *old = gf_path_join(d->stage, "old");
        rc = old && rename(to, old) == 0 && rename(from, to) == 0 ? 0 : -1;
        free(old);
    }
    int e = errno;
    free(from);
    free(to);
    errno = e;
    return rc;
}

int gf_report_dir_commit(gf_report_dir *d)
{
    if (!d->stage)
        return 0;
    /* failures/ first: the new run.json names only files that exist; then
     * each format's file (GF_REPORT_FORMAT_LIST) */
    if (put_in_place(d, "failures", 1) != 0)
        return -1;
    for (const gf_report_format *f = gf_report_formats; f->name; f++)
        if (put_in_place(d, f->file, 0) != 0)
            return -1;
    return 0;
}

void gf_report_dir_close(gf_report_dir *d)
{
    if (!d)
        return;
    if (d->stage)
        rm_tree(d->stage); /* what was not moved, and the old failures/ */
    if (d->lock_fd >= 0) {
        if (g_lock_fd == d->lock_fd)
            g_lock_fd = -1;
        close(d->lock_fd); /* releases the flock */
    }
    free(d->dir);
    free(d->stage);
    memset(d, 0, sizeof *d);
    d->lock_fd = -1;
}
