/* JSON output helpers: escaped strings, numbers that may be non-finite. */
#include "json.h"

#include <math.h>
#include <stdio.h>

void gf_json_write_string(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        }
    }
    fputc('"', f);
}

void gf_json_write_number(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.17g", x);
    else
        fputs("null", f);
}

void gf_json_set_number(json_t *obj, const char *key, double v, const char *reason)
{
    if (isfinite(v)) {
        json_object_set_new(obj, key, json_real(v));
        return;
    }
    json_object_set_new(obj, key, json_null());
    char rk[256];
    snprintf(rk, sizeof rk, "%s_reason", key);
    const char *r = reason ? reason : isnan(v) ? "nan" : v > 0 ? "+inf" : "-inf";
    json_object_set_new(obj, rk, json_string(r));
}

json_t *gf_json_doubles(const double *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, isfinite(v[i]) ? json_real(v[i]) : json_null());
    return a;
}

json_t *gf_json_ints(const int32_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

json_t *gf_json_strings(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}
