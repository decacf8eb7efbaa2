/* The http backend's one HTTP client: libcurl (Debian's libcurl4), easy
 * interface, one handle per request. Bounded: a request has a connect timeout
 * and a total timeout, a reply body at most 64 MiB, and a failed try
 * (HTTP 429, 500, 502, 503, 504, a connection reset or closed before a reply)
 * is retried at most conf->retries times, after the server's Retry-After
 * (capped at conf->retry_wait) or a short pause. A timeout is not retried: a
 * hung server costs one timeout, not retries + 1 of them. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hb.h"

#define HB_BODY_MAX ((size_t)64 << 20)

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static CURLcode g_init_rc = CURLE_FAILED_INIT;

static void init_once(void) { g_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

gf_status hb_net_init(char *why, size_t why_len)
{
    pthread_once(&g_once, init_once);
    if (g_init_rc != CURLE_OK) {
        if (why && why_len)
            snprintf(why, why_len, "libcurl's curl_global_init failed: %s", curl_easy_strerror(g_init_rc));
        return GF_E_UNAVAILABLE;
    }
    return GF_OK;
}

const char *hb_net_version(void) { return curl_version(); }

void hb_reply_free(hb_reply *r)
{
    if (!r)
        return;
    free(r->body);
    memset(r, 0, sizeof *r);
}

typedef struct sink {
    char *buf; /* (cap) */
    size_t len, cap;
    int over;           /* 1: past HB_BODY_MAX */
    double retry_after; /* seconds from a Retry-After header, -1 if none */
} sink;

static size_t on_body(char *p, size_t size, size_t n, void *user)
{
    sink *s = user;
    size_t add = size * n;
    if (s->len + add + 1 > HB_BODY_MAX) {
        s->over = 1;
        return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
    }
    if (s->len + add + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + add + 1)
            cap *= 2;
        char *nb = realloc(s->buf, cap);
        if (!nb)
            return 0;
        s->buf = nb;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, add);
    s->len += add;
    s->buf[s->len] = '\0';
    return add;
}

static size_t on_header(char *p, size_t size, size_t n, void *user)
{
    sink *s = user;
    size_t len = size * n;
    static const char key[] = "retry-after:";
    if (len > sizeof key - 1 && !strncasecmp(p, key, sizeof key - 1)) {
        char tmp[64];
        size_t m = len - (sizeof key - 1) < sizeof tmp - 1 ? len - (sizeof key - 1) : sizeof tmp - 1;
        memcpy(tmp, p + sizeof key - 1, m);
        tmp[m] = '\0';
        char *end = NULL;
        double v = strtod(tmp, &end);
        if (end != tmp && v >= 0)
            s->retry_after = v; /* an HTTP-date is not read: the default pause applies */
    }
    return len;
}

static void pause_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static int retried_status(long st) { return st == 429 || st == 500 || st == 502 || st == 503 || st == 504; }
static int retried_curl(CURLcode rc)
{
    return rc == CURLE_GOT_NOTHING || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR;
}

gf_status hb_request(const hb_conf *c, const char *path, const char *json, hb_reply *r)
{
    memset(r, 0, sizeof *r);
    char why[256];
    if (hb_net_init(why, sizeof why) != GF_OK)
        return gf_error_set(GF_E_UNAVAILABLE, "http: %s", why);
    char url[1024];
    snprintf(url, sizeof url, "%s%s", c->url, path);
    const char *method = json ? "POST" : "GET";
    double pause = 0.25;
    for (int attempt = 0;; attempt++) {
        CURL *h = curl_easy_init();
        if (!h)
            return gf_error_set(GF_E_NOMEM, "http: curl_easy_init failed");
        sink s = {.retry_after = -1};
        char err[CURL_ERROR_SIZE] = "";
        struct curl_slist *hdr = NULL;
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        hdr = curl_slist_append(hdr, "Accept: application/json, text/event-stream");
        hdr = curl_slist_append(hdr, "Expect:");
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        /* a loopback server is never reached through an environment proxy */
        curl_easy_setopt(h, CURLOPT_NOPROXY, "127.0.0.1,localhost,::1");
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(c->connect_timeout * 1000));
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->timeout * 1000));
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &s);
        if (json) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(json));
        }
        CURLcode rc = curl_easy_perform(h);
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(hdr);
        curl_easy_cleanup(h);
        int can_retry = attempt < c->retries;
        if (rc == CURLE_OK && !(retried_status(status) && can_retry)) {
            if (!s.buf) {
                s.buf = calloc(1, 1);
                if (!s.buf)
                    return gf_error_set(GF_E_NOMEM, "http: out of memory");
            }
            r->status = status;
            r->body = s.buf;
            r->len = s.len;
            r->tries = attempt + 1;
            return GF_OK;
        }
        free(s.buf);
        if (s.over)
            return gf_error_set(GF_E_BACKEND, "http: %s %s: the reply is over %zu MiB", method, url, HB_BODY_MAX >> 20);
        if (rc == CURLE_OPERATION_TIMEDOUT)
            return gf_error_set(GF_E_BACKEND, "http: %s %s: timed out after %g s (timeout=%g): %s", method, url,
                                c->timeout, c->timeout, err[0] ? err : curl_easy_strerror(rc));
        if (rc != CURLE_OK && !(retried_curl(rc) && can_retry))
            return gf_error_set(GF_E_BACKEND, "http: %s %s: %s%s%s (after %d tr%s)", method, url,
                                curl_easy_strerror(rc), err[0] ? ": " : "", err, attempt + 1, attempt ? "ies" : "y");
        double wait = s.retry_after >= 0 ? s.retry_after : pause;
        if (wait > c->retry_wait)
            wait = c->retry_wait;
        pause_s(wait);
        pause *= 2;
    }
}
