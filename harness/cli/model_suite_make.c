/* The model suite's makers: the goldens (tools/reference/golden.py, or
 * genfence bless on ref) and the statistical cases' calibration
 * (tools/calibrate/calibrate.py), each run on the instantiated suite into the
 * addresses model_suite.c gave them (docs/goldens.md "Goldens on demand",
 * docs/calibration.md "A user's model"). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "buf.h"
#include "model_suite.h"
#include "sys.h"

static char *self_exe(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return strdup("genfence");
    exe[n] = '\0';
    return strdup(exe);
}

/* mkdir -p of the folder that will hold file; 0 ok, -1 after the error. */
static int make_folder_of(const char *cmd, const char *file)
{
    char *d = strdup(file);
    char *slash = d ? strrchr(d, '/') : NULL;
    if (slash)
        *slash = '\0';
    if (!d || gf_ms_mkdirs(d) != 0) {
        gf_cli_error("%s: cannot make %s: %s", cmd, d ? d : "?", strerror(errno));
        free(d);
        return -1;
    }
    free(d);
    return 0;
}

int gf_model_suite_make_goldens(gf_model_suite *ms, const char *cmd, int force, int threads)
{
    char re[8192] = "^(";
    size_t n = 0;
    for (size_t i = 0; i < ms->n_goldens; i++) {
        if (!force && gf_ms_is_file(ms->golden_paths[i]))
            continue;
        char one[600];
        gf_id_regex(one, sizeof one, ms->golden_ids[i]);
        one[strlen(one) - 1] = '\0'; /* ^id$ -> id */
        if (strlen(re) + strlen(one) + 4 >= sizeof re)
            break;
        strcat(re, n ? "|" : "");
        strcat(re, one + 1);
        n++;
    }
    strcat(re, ")$");
    if (!n) {
        printf("%s: every golden of the suite is in the cache (%zu); --force remakes them\n", cmd, ms->n_goldens);
        return GF_EXIT_OK;
    }
    for (size_t i = 0; i < ms->n_goldens; i++)
        if (make_folder_of(cmd, ms->golden_paths[i]) != 0)
            return GF_EXIT_USAGE;
    char *exe = self_exe();
    int rc;
    printf("%s: making %zu golden%s with %s\n", cmd, n, n == 1 ? "" : "s", ms->generator);
    fflush(stdout);
    if (ms->source == GF_GOLDENS_REF) {
        char th[32];
        snprintf(th, sizeof th, "%d", threads);
        char *argv[] = {"bless", "--backend", "ref", "--filter", re, "--threads", th, "--force", ms->make_file, NULL};
        rc = gf_cmd_bless(9, argv);
    } else if (!ms->python) {
        gf_cli_error("%s: %s", cmd, ms->python_why);
        rc = GF_EXIT_USAGE;
    } else {
        char *tool = gf_ms_root_path("tools/reference/golden.py");
        char qp[PATH_MAX + 8], qt[PATH_MAX + 8], qe[PATH_MAX + 8], qr[sizeof re + 8], qs[PATH_MAX + 8];
        gf_shell_quote(qp, sizeof qp, ms->python);
        gf_shell_quote(qt, sizeof qt, tool ? tool : "golden.py");
        gf_shell_quote(qe, sizeof qe, exe);
        gf_shell_quote(qr, sizeof qr, re);
        gf_shell_quote(qs, sizeof qs, ms->make_file);
        char *line = gf_str_printf("%s %s --genfence %s --threads %d --filter %s %s", qp, qt, qe, threads, qr, qs);
        int st = line ? system(line) : -1;
        rc = st == 0 ? GF_EXIT_OK : WIFEXITED(st) && WEXITSTATUS(st) == 2 ? GF_EXIT_USAGE : GF_EXIT_FAIL;
        if (rc != GF_EXIT_OK)
            gf_cli_error("%s: `%s` failed (status %d)", cmd, line ? line : "golden.py",
                         WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        free(line);
        free(tool);
    }
    free(exe);
    return rc;
}

int gf_model_suite_calibrate(gf_model_suite *ms, const char *cmd, int force, int reseeds, const char *corpus)
{
    if (!ms->stat_ids) {
        gf_cli_error("%s: --calibrate: the suite has no distribution_match case to calibrate", cmd);
        return GF_EXIT_USAGE;
    }
    if (!force && gf_model_suite_calibrated(ms)) {
        printf("%s: the calibration of %s is in the cache (%s); --force measures it again\n", cmd, ms->stat_ids,
               ms->calibration_path);
        return GF_EXIT_OK;
    }
    if (gf_model_suite_goldens_cached(ms) < ms->n_goldens) {
        gf_cli_error("%s: --calibrate: %zu golden%s missing: the null is measured against them", cmd,
                     ms->n_goldens - gf_model_suite_goldens_cached(ms),
                     ms->n_goldens - gf_model_suite_goldens_cached(ms) == 1 ? " is" : "s are");
        return GF_EXIT_FAIL;
    }
    if (make_folder_of(cmd, ms->calibration_path) != 0)
        return GF_EXIT_USAGE;
    char *exe = self_exe(), *tool = gf_ms_root_path("tools/calibrate/calibrate.py");
    char *build = exe ? strdup(exe) : NULL;
    char *slash = build ? strrchr(build, '/') : NULL;
    if (slash)
        *slash = '\0';
    /* with --force the table is rewritten in place: calibrate.py replaces
     * the nulls it measures (the suite's), so the suite that names it still
     * loads while it runs */
    char qp[PATH_MAX + 8], qt[PATH_MAX + 8], qb[PATH_MAX + 8], qf[PATH_MAX + 8], qo[PATH_MAX + 8], qi[4096],
        qc[PATH_MAX + 8] = "";
    gf_shell_quote(qp, sizeof qp, ms->python ? ms->python : "python3");
    gf_shell_quote(qt, sizeof qt, tool ? tool : "calibrate.py");
    gf_shell_quote(qb, sizeof qb, build ? build : ".");
    gf_shell_quote(qf, sizeof qf, ms->make_file);
    gf_shell_quote(qo, sizeof qo, ms->calibration_path);
    gf_shell_quote(qi, sizeof qi, ms->stat_ids);
    if (corpus)
        gf_shell_quote(qc, sizeof qc, corpus);
    char *line = gf_str_printf("%s %s --build %s --file %s --cases %s --types f32/f32 --reseeds %d --out %s%s%s", qp,
                               qt, qb, qf, qi, reseeds, qo, corpus ? " --corpus " : "", qc);
    printf("%s: calibrating %s: %d reseeds x the honest f32 backends (ref, openblas, onednn)\n", cmd, ms->stat_ids,
           reseeds);
    fflush(stdout);
    int st = line ? system(line) : -1;
    int rc = st == 0 && gf_model_suite_calibrated(ms) ? GF_EXIT_OK : GF_EXIT_FAIL;
    if (rc != GF_EXIT_OK)
        gf_cli_error("%s: `%s` failed (status %d)", cmd, line ? line : "calibrate.py",
                     WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    free(line);
    free(tool);
    free(build);
    free(exe);
    return rc;
}
