/* gf_status strings and the thread-local error message. */
#include "genfence/status.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char g_msg[2048];

const char *gf_status_str(gf_status s)
{
    switch (s) {
#define GF_X_CASE(name, value, text) \
    case name: return text;
        GF_STATUS_LIST(GF_X_CASE)
#undef GF_X_CASE
    }
    return "unknown status";
}

gf_status gf_error_set(gf_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    return s;
}

gf_status gf_error_prefix(gf_status s, const char *fmt, ...)
{
    char prefix[1024], old[sizeof g_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, g_msg, sizeof old);
    snprintf(g_msg, sizeof g_msg, "%.1000s: %.1000s", prefix,
             gf_error_unprefixed(old[0] ? old : gf_status_str(s), prefix));
    return s;
}

const char *gf_error_unprefixed(const char *msg, const char *prefix)
{
    /* the prefix's first segment ("generate" of "generate: step 3") said once */
    const char *colon = strstr(prefix, ": ");
    size_t n = colon ? (size_t)(colon - prefix) : strlen(prefix);
    while (n && !strncmp(msg, prefix, n) && msg[n] == ':' && msg[n + 1] == ' ')
        msg += n + 2;
    return msg;
}

const char *gf_error_msg(void) { return g_msg; }

void gf_error_clear(void) { g_msg[0] = '\0'; }
