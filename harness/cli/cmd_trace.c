/* genfence trace: `genfence run` with every model case localized (the
 * replay of its calls traced on the backend and on ref, harness/run/
 * localize.h), whatever its verdict, and every trace point's NMSE printed.
 * A failing case's console line gives this command as its trace line. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

int gf_cmd_trace(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: genfence trace [PATHS...] --filter REGEX --backend NAME|PATH [run's options]\n"
                   "\n"
                   "Runs the cases as `genfence run` does (the same options, the same verdicts and exit\n"
                   "status), and for every model case on a backend with the trace slot (docs/backends.md,\n"
                   "\"The trace slot\") replays its forward calls with tracing on, on the backend and on ref,\n"
                   "and prints the NMSE of every trace point of the first call past a bound (or says the\n"
                   "trace matches ref below every bound): the first divergent layer and sublayer, the rows\n"
                   "and positions there, the worst (row, position, channel). A failing case of\n"
                   "`genfence run` prints this command as its trace line.\n"
                   "\n"
                   "exit status: as genfence run (0 all passed, 1 a case failed, 2 bad input or usage)\n");
            return GF_EXIT_OK;
        }
    return gf_cmd_run_traced(argc, argv, 1);
}
