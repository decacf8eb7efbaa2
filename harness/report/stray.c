/* Files in the report folder that genfence did not write: a backend's logs
 * or dumps left there during the run are listed in the report as not
 * genfence's (issue 25), instead of staying unmentioned beside it. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

json_t *gf_report_dir_listing(const char *dir)
{
    json_t *names = json_object();
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d)
        return names;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            json_object_set_new(names, e->d_name, json_true());
    closedir(d);
    return names;
}

/* genfence's own names in a report folder (outdir.c, reproduce.c) */
static int ours(const char *name)
{
    static const char *const own[] = {"run.json", "junit.xml", "index.html", "failures", ".lock", "reproduce"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (!strcmp(name, own[i]))
            return 1;
    return !strncmp(name, ".staging.", 9);
}

/* 1 if some job's record names an artifact whose file name is name */
static int named(const gf_job *jobs, size_t n_jobs, const char *name)
{
    for (size_t i = 0; i < n_jobs; i++) {
        json_t *arts = jobs[i].record ? json_object_get(jobs[i].record, "artifacts") : NULL;
        size_t k;
        json_t *a;
        json_array_foreach(arts, k, a)
        {
            const char *p = json_string_value(json_is_object(a) ? json_object_get(a, "path") : a);
            const char *base = p ? strrchr(p, '/') : NULL;
            if (p && !strcmp(base ? base + 1 : p, name))
                return 1;
        }
    }
    return 0;
}

json_t *gf_report_dir_strays(const gf_report_dir *d, json_t *before, const gf_job *jobs, size_t n_jobs)
{
    json_t *out = json_array();
    if (!d || !d->dir)
        return out;
    json_t *now = gf_report_dir_listing(d->dir);
    const char *name;
    json_t *v;
    json_object_foreach(now, name, v)
    {
        if (ours(name) || (before && json_object_get(before, name)))
            continue;
        char *p = malloc(strlen(d->dir) + strlen(name) + 2);
        if (p) {
            sprintf(p, "%s/%s", d->dir, name);
            json_array_append_new(out, json_string(p));
            free(p);
        }
    }
    json_decref(now);
    if (d->stage) { /* this run's failures/: files no result names (written there by a backend) */
        size_t n = strlen(d->stage) + sizeof "/failures";
        char *fdir = malloc(n);
        if (fdir) {
            snprintf(fdir, n, "%s/failures", d->stage);
            json_t *fl = gf_report_dir_listing(fdir);
            json_object_foreach(fl, name, v)
            {
                if (named(jobs, n_jobs, name))
                    continue;
                char *p = malloc(strlen(d->dir) + strlen(name) + sizeof "/failures/");
                if (p) {
                    sprintf(p, "%s/failures/%s", d->dir, name);
                    json_array_append_new(out, json_string(p));
                    free(p);
                }
            }
            json_decref(fl);
            free(fdir);
        }
    }
    return out;
}
