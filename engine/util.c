/* Small helpers written once (genfence/util.h). */
#include "genfence/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *gf_path_join(const char *dir, const char *file)
{
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, file);
    return p;
}

uint64_t gf_env_limit(const char *name, uint64_t dflt)
{
    const char *e = getenv(name);
    if (e && *e) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(e, &end, 10);
        if (!errno && !*end && v > 0)
            return (uint64_t)v;
    }
    return dflt;
}
