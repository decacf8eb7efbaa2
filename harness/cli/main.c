/* genfence: command dispatch. The only file that exits the process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "genfence/version.h"

typedef struct gf_command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} gf_command;

static const gf_command k_commands[] = {
    {"run", gf_cmd_run, "run conformance cases (YAML) on backends, each in its own process"},
    {"trace", gf_cmd_trace, "replay cases traced on a backend and ref: the first divergent layer and sublayer"},
    {"list", gf_cmd_list, "list (and check) the conformance cases"},
    {"bless", gf_cmd_bless, "write goldens from a C backend (docs/goldens.md)"},
    {"goldens", gf_cmd_goldens, "make a model's goldens on demand (transformers) into the user's cache"},
    {"generate", gf_cmd_generate, "generate a continuation (cached or not, streamed, verified)"},
    {"forward", gf_cmd_forward, "write the logits of every position to a safetensors file"},
    {"tokenize", gf_cmd_tokenize, "encode text to token ids, or decode ids to text"},
    {"backends", gf_cmd_backends, "list backends, their availability and versions"},
    {"compare", gf_cmd_compare, "compare two run reports: verdict changes, drift, the audit differences behind them"},
    {"merge", gf_cmd_merge, "join the reports of run --shard I/N into the report of the whole run"},
    {"baseline", gf_cmd_baseline, "write a baseline of known findings (run --baseline) from a run report"},
    {"scoreboard", gf_cmd_scoreboard, "the conformance table (Markdown) of run reports: docs/conformance.md"},
    {"bench", gf_cmd_bench, "time backends: prefill, decode, memory, against the machine's bandwidth and peak"},
};
enum { N_COMMANDS = sizeof k_commands / sizeof k_commands[0] };

static void usage(FILE *f)
{
    fprintf(f,
            "genfence %s -- conformance and verification harness for LLM inference\n"
            "\n"
            "usage: genfence COMMAND [OPTIONS]\n"
            "       genfence COMMAND --help\n"
            "       genfence --version\n"
            "       genfence --module-dir DIR COMMAND ...  (backend modules from DIR: GENFENCE_MODULE_PATH)\n"
            "\n"
            "commands:\n",
            GENFENCE_VERSION);
    for (int i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", k_commands[i].name, k_commands[i].summary);
    fprintf(f, "\nexit status: 0 all passed, 1 a check failed, 2 bad input or usage\n");
}

int main(int argc, char **argv)
{
    /* OpenMP backends (oneDNN) otherwise spin between products, which starves
     * the other processes of a parallel run; a user's own setting wins. */
    setenv("OMP_WAIT_POLICY", "passive", 0);
    if (argc < 2) {
        usage(stderr);
        return GF_EXIT_USAGE;
    }
    /* genfence --module-dir DIR COMMAND ...: the backend modules from DIR
     * (GENFENCE_MODULE_PATH, so the children and reproduce lines see it too;
     * it wins over GENFENCE_MODULE_DIR, the variable's older name) */
    while (argc >= 3 && (!strcmp(argv[1], "--module-dir") || !strncmp(argv[1], "--module-dir=", 13))) {
        int eq = argv[1][12] == '=';
        const char *dir = eq ? argv[1] + 13 : argv[2];
        if (!dir[0]) {
            fprintf(stderr, "genfence: --module-dir needs a directory\n");
            return GF_EXIT_USAGE;
        }
        setenv("GENFENCE_MODULE_PATH", dir, 1);
        argc -= eq ? 1 : 2;
        argv += eq ? 1 : 2;
    }
    if (argc < 2) {
        usage(stderr);
        return GF_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return GF_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("genfence %s (commit %s)\n", GENFENCE_VERSION, GENFENCE_COMMIT);
        return GF_EXIT_OK;
    }
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(cmd, k_commands[i].name))
            return k_commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "genfence: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return GF_EXIT_USAGE;
}
