/* Strays: processes a backend started that left their child's process group
 * (setsid after a double fork: a daemon). Every child is a child subreaper
 * (pool.c), so while it lives its orphaned descendants stay below it; once it
 * is gone they are reparented to genfence, itself a subreaper while the pool
 * runs. A child of genfence that is not a live pool child is therefore left
 * over from a finished one, and is killed. */
#define _GNU_SOURCE
#include "pool.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int gf_pool_subreaper_begin(void)
{
    int prev = 0;
    if (prctl(PR_GET_CHILD_SUBREAPER, &prev, 0, 0, 0) != 0)
        prev = 0;
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    return prev;
}

void gf_pool_subreaper_end(int previous) { prctl(PR_SET_CHILD_SUBREAPER, previous, 0, 0, 0); }

/* The parent pid in /proc/PID/stat (after the command's closing paren: the
 * command may hold spaces and parens), or -1. */
static pid_t stat_ppid(const char *pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    char state;
    int ppid;
    if (!p || sscanf(p + 1, " %c %d", &state, &ppid) != 2)
        return -1;
    return (pid_t)ppid;
}

size_t gf_pool_kill_strays(const pid_t *live, size_t n_live)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    pid_t self = getpid();
    size_t killed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        if (stat_ppid(e->d_name) != self)
            continue;
        pid_t pid = (pid_t)strtol(e->d_name, NULL, 10);
        int ours = 0;
        for (size_t i = 0; i < n_live && !ours; i++)
            ours = live[i] == pid;
        if (ours)
            continue;
        kill(pid, SIGKILL); /* a zombie already dead: harmless */
        /* SIGKILL'd: it dies soon; wait briefly, never forever */
        for (int tries = 0; tries < 200; tries++) {
            pid_t w = waitpid(pid, NULL, WNOHANG);
            if (w == pid || (w < 0 && errno == ECHILD))
                break;
            usleep(1000);
        }
        killed++;
    }
    closedir(d);
    return killed;
}
