#include "fuzz_common.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char scratch[256];

static void remove_scratch(void)
{
    char cmd[300];
    if (scratch[0] && strstr(scratch, "gf-fuzz.")) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", scratch);
    }
}

const char *gf_fuzz_dir(void)
{
    if (!scratch[0]) {
        const char *base = getenv("TMPDIR");
        if (!base || !base[0])
            base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(scratch, sizeof scratch, "%s/gf-fuzz.XXXXXX", base);
        if (!mkdtemp(scratch)) {
            perror("mkdtemp");
            abort();
        }
        atexit(remove_scratch);
    }
    return scratch;
}

const char *gf_fuzz_path(int slot, const char *name)
{
    static char buf[4][512];
    snprintf(buf[slot & 3], sizeof buf[0], "%s/%s", gf_fuzz_dir(), name);
    return buf[slot & 3];
}

void gf_fuzz_write(const char *path, const void *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(path);
        abort();
    }
    const char *p = data;
    while (size) {
        ssize_t w = write(fd, p, size);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            perror(path);
            abort();
        }
        p += w;
        size -= (size_t)w;
    }
    close(fd);
}
