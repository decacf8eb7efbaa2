/* Replay mode of a fuzz target: LLVMFuzzerTestOneInput on every file named on
 * the command line (directories: every regular file in them, sorted), so CTest
 * runs the committed corpora and regression inputs under ASan + UBSan without
 * libFuzzer. Exit 0 when every input ran; a sanitizer report or a failed
 * property aborts. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 0;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "%s: cannot read\n", path);
        fclose(f);
        free(buf);
        return 0;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 1;
}

static int run_path(const char *path, size_t *count)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        perror(path);
        return 0;
    }
    if (!S_ISDIR(sb.st_mode)) {
        *count += 1;
        return run_file(path);
    }
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        return 0;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char **g = realloc(names, (n + 1) * sizeof *g);
        if (!g)
            abort();
        names = g;
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        snprintf(names[n++], len, "%s/%s", path, e->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp);
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        ok &= run_path(names[i], count);
        free(names[i]);
    }
    free(names);
    return ok;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    size_t count = 0;
    int ok = 1;
    for (int i = 1; i < argc; i++)
        ok &= run_path(argv[i], &count);
    printf("%s: %zu inputs replayed\n", argv[0], count);
    if (count == 0) {
        fprintf(stderr, "no inputs found\n");
        return 1;
    }
    return ok ? 0 : 1;
}
