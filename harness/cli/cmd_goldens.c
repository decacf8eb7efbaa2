/* genfence goldens --model DIR: make the model suite's goldens on demand
 * into the user's cache (model_suite.c; docs/goldens.md "Goldens on demand"). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "model_suite.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: genfence goldens --model DIR [TEMPLATES...] [--reference transformers|ref] [--force]\n"
               "                        [--threads N] [--calibrate [--reseeds R] [--corpus FILE]]\n"
               "\n"
               "Makes the goldens of the model suite (cases/model/*.yaml, or TEMPLATES) for the model in\n"
               "DIR (a Hugging Face model directory or hub cache folder: models--ORG--NAME with snapshots/\n"
               "and refs/main) into $XDG_CACHE_HOME/genfence/goldens (default ~/.cache/genfence),\n"
               "each at an address made of the model hash, the case hash and the generator's versions:\n"
               "a second call finds them; a changed model, case or generator makes new ones, never\n"
               "reusing the old (docs/goldens.md \"Goldens on demand\").\n"
               "\n"
               "  --reference transformers  tools/reference/golden.py with transformers on PyTorch\n"
               "                            (default; $GENFENCE_PYTHON, else .venv/bin/python, else python3)\n"
               "  --reference ref           genfence's ref backend (genfence bless), where torch is not\n"
               "                            installed: marked genfence-bless ref in every golden\n"
               "  --force                   remake goldens already in the cache\n"
               "  --threads N               threads for the maker (default 1)\n"
               "  --calibrate               then measure the statistical cases' null on this model\n"
               "                            (tools/calibrate/calibrate.py: R reseeds x ref, openblas,\n"
               "                            onednn) into the cache beside the goldens, content-addressed\n"
               "                            as they are: the run then judges those cases by hypothesis\n"
               "                            tests (alpha, beta, theta), not by fixed bounds\n"
               "                            (docs/calibration.md \"A user's model\"); --force remeasures\n"
               "  --reseeds R               reseeds of the calibration (default 10)\n"
               "  --corpus FILE             the text the reseeds' prompts are drawn from (default:\n"
               "                            ../shared/data/sherlock-holmes-canon.txt beside the repository)\n"
               "\n"
               "exit status: 0 made (or all cached), 1 the maker or the calibration failed, 2 bad input or no maker\n");
}

int gf_cmd_goldens(int argc, char **argv)
{
    enum { O_MODEL = 256, O_REF, O_FORCE, O_THREADS, O_CALIBRATE, O_RESEEDS, O_CORPUS };
    static const struct option longopts[] = {{"model", required_argument, 0, O_MODEL},
                                             {"reference", required_argument, 0, O_REF},
                                             {"force", no_argument, 0, O_FORCE},
                                             {"threads", required_argument, 0, O_THREADS},
                                             {"calibrate", no_argument, 0, O_CALIBRATE},
                                             {"reseeds", required_argument, 0, O_RESEEDS},
                                             {"corpus", required_argument, 0, O_CORPUS},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    const char *model = NULL, *corpus = NULL;
    gf_golden_source source = GF_GOLDENS_TRANSFORMERS;
    int force = 0, calibrate = 0, c;
    long threads = 1, reseeds = 10;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_MODEL: model = optarg; break;
        case O_REF:
            if (!strcmp(optarg, "ref"))
                source = GF_GOLDENS_REF;
            else if (strcmp(optarg, "transformers")) {
                gf_cli_error("goldens: --reference %s: want transformers or ref", optarg);
                return GF_EXIT_USAGE;
            }
            break;
        case O_FORCE: force = 1; break;
        case O_THREADS:
            if (!gf_parse_int(optarg, 1, 4096, &threads)) {
                gf_cli_error("goldens: bad value '%s' for --threads: want an integer from 1 to 4096", optarg);
                return GF_EXIT_USAGE;
            }
            break;
        case O_CALIBRATE: calibrate = 1; break;
        case O_RESEEDS:
            if (!gf_parse_int(optarg, 2, 100000, &reseeds)) {
                gf_cli_error("goldens: bad value '%s' for --reseeds: want an integer from 2 to 100000", optarg);
                return GF_EXIT_USAGE;
            }
            break;
        case O_CORPUS: corpus = optarg; break;
        case 'h': usage(stdout); return GF_EXIT_OK;
        default:
            gf_cli_error("goldens: unknown or incomplete option '%s' (genfence goldens --help)", argv[optind - 1]);
            return GF_EXIT_USAGE;
        }
    }
    if ((corpus || reseeds != 10) && !calibrate) {
        gf_cli_error("goldens: --reseeds and --corpus go with --calibrate");
        return GF_EXIT_USAGE;
    }
    if (corpus && access(corpus, R_OK) != 0) {
        gf_cli_error("goldens: --corpus %s: cannot read it", corpus);
        return GF_EXIT_USAGE;
    }
    if (!model) {
        gf_cli_error("goldens: --model DIR is required (genfence goldens --help)");
        return GF_EXIT_USAGE;
    }
    gf_model_suite ms;
    if (gf_model_suite_open(&ms, "goldens", model, source, (const char *const *)argv + optind,
                            (size_t)(argc - optind)) != 0) {
        gf_model_suite_free(&ms);
        return GF_EXIT_USAGE;
    }
    gf_model_suite_print(&ms, "goldens", stdout);
    int rc = gf_model_suite_make_goldens(&ms, "goldens", force, (int)threads);
    if (rc == GF_EXIT_OK)
        printf("goldens: %zu of %zu goldens in the cache\n", gf_model_suite_goldens_cached(&ms), ms.n_goldens);
    if (rc == GF_EXIT_OK && calibrate)
        rc = gf_model_suite_calibrate(&ms, "goldens", force, (int)reseeds, corpus);
    gf_model_suite_free(&ms);
    return rc;
}
