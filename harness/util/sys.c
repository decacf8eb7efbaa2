/* Process and file-system helpers: clocks, CPUs, atomic writes, shell quoting. */
#define _GNU_SOURCE
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double gf_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int gf_cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Single-quote s for a POSIX shell when it needs it (into dst, cap bytes). */
void gf_shell_quote(char *dst, size_t cap, const char *s)
{
    int plain = *s != '\0';
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("_-./=:@+,", *p)))
            plain = 0;
    if (plain) {
        snprintf(dst, cap, "%s", s);
        return;
    }
    size_t at = 0;
    if (at < cap)
        dst[at++] = '\'';
    for (const char *p = s; *p && at + 5 < cap; p++) {
        if (*p == '\'') {
            memcpy(dst + at, "'\\''", 4);
            at += 4;
        } else {
            dst[at++] = *p;
        }
    }
    if (at + 1 < cap)
        dst[at++] = '\'';
    dst[at < cap ? at : cap - 1] = '\0';
}

int gf_cpu_model(char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) && strncmp(line, "Hardware", 8))
            continue;
        char *v = strchr(line, ':');
        if (!v)
            continue;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        v[strcspn(v, "\n")] = '\0';
        snprintf(buf, cap, "%s", v);
        break;
    }
    if (f)
        fclose(f);
    return buf[0] != '\0';
}

int gf_write_atomic(const char *path, const char *data, size_t len)
{
    size_t n = strlen(path) + 64;
    char *tmp = malloc(n);
    if (!tmp) {
        errno = ENOMEM;
        return -1;
    }
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        free(tmp);
        return -1;
    }
    size_t at = 0;
    while (at < len) {
        ssize_t w = write(fd, data + at, len - at);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            unlink(tmp);
            free(tmp);
            errno = e;
            return -1;
        }
        at += (size_t)w;
    }
    if (fsync(fd) < 0 && errno != EINVAL) {
        /* best effort */
    }
    if (close(fd) < 0 || rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        free(tmp);
        errno = e;
        return -1;
    }
    free(tmp);
    return 0;
}

void gf_id_regex(char *dst, size_t cap, const char *id)
{
    size_t at = 0;
    if (cap < 4) {
        if (cap)
            dst[0] = '\0';
        return;
    }
    dst[at++] = '^';
    for (const char *p = id; *p && at + 4 < cap; p++) {
        if (*p == '.')
            dst[at++] = '\\';
        dst[at++] = *p;
    }
    dst[at++] = '$';
    dst[at] = '\0';
}
