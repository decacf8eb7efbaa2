/* genfence subcommands. Each parses its own arguments (getopt_long), prints
 * its own --help, and returns the process exit status; only main() exits.
 * Exit status: 0 ok / all passed, 1 a case failed, 2 bad input or usage. */
#ifndef GENFENCE_COMMANDS_H
#define GENFENCE_COMMANDS_H

enum { GF_EXIT_OK = 0, GF_EXIT_FAIL = 1, GF_EXIT_USAGE = 2 };

int gf_cmd_tokenize(int argc, char **argv);
int gf_cmd_generate(int argc, char **argv);
int gf_cmd_forward(int argc, char **argv);
int gf_cmd_backends(int argc, char **argv);
int gf_cmd_run(int argc, char **argv);
int gf_cmd_list(int argc, char **argv);
int gf_cmd_bless(int argc, char **argv);
int gf_cmd_goldens(int argc, char **argv);
int gf_cmd_bench(int argc, char **argv);
int gf_cmd_compare(int argc, char **argv);
int gf_cmd_merge(int argc, char **argv);
int gf_cmd_scoreboard(int argc, char **argv);
int gf_cmd_baseline(int argc, char **argv);

#endif
