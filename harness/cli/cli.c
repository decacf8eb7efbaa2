/* Helpers shared by the subcommands. */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>

void gf_cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("genfence: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
