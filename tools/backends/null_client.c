/* null_client: the protocol's floor, for tools/backends/overhead.sh.
 *
 * Answers every request correctly in form and does no arithmetic: model_load
 * reads nothing but the config block, forward returns zero logits of the
 * right shape and keeps the cache length. Decoding on it measures what one
 * forward costs over the wire (request, reply of V floats, two context
 * switches) plus genfence's own loop, with no model in the way. Its logits
 * are wrong on purpose: it is a measuring stick, not a backend to judge
 * (the golden cases fail on it).
 *
 *     cc -O2 -std=c11 -o null_client null_client.c */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int io(int fd, void *p, size_t n, int out)
{
    uint8_t *b = p;
    while (n) {
        ssize_t r = out ? write(fd, b, n) : read(fd, b, n);
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

static void reply(const void *body, uint32_t n)
{
    uint32_t hdr[2] = {0, n};
    if (io(1, hdr, 8, 1) || io(1, (void *)body, n, 1))
        exit(1);
}

int main(void)
{
    int32_t V = 0, P = 0, len[64] = {0}, next = 0;
    uint8_t *out = NULL;
    uint32_t hdr[2];
    while (io(0, hdr, 8, 0) == 0) {
        uint8_t *b = malloc(hdr[1] + 4);
        if (!b || io(0, b, hdr[1], 0))
            return 1;
        int32_t w[6] = {0};
        memcpy(w, b, hdr[1] < 24 ? hdr[1] : 24);
        switch (hdr[0]) {
        case 1: { /* hello: magic, version 1, features 0, name, empty description */
            uint32_t h[6] = {0x50434647u, 1, 0, 4, 0, 0};
            memcpy(&h[4], "null", 4);
            reply(h, 24);
            break;
        }
        case 3: { /* info: f32, 1 thread, two empty strings */
            uint32_t h[4] = {1, 1, 0, 0};
            reply(h, 16);
            break;
        }
        case 4: { /* model_load: V and n_positions from the config block */
            uint32_t n = (uint32_t)w[1];
            memcpy(&V, b + 8 + n + 16, 4);
            memcpy(&P, b + 8 + n + 20, 4);
            int32_t r[2] = {V, P};
            reply(r, 8);
            break;
        }
        case 5: { uint32_t id = (uint32_t)(++next & 63); len[id] = 0; reply(&id, 4); break; }
        case 6: len[w[0] & 63] = 0; reply(NULL, 0); break;
        case 8: reply(&len[w[0] & 63], 4); break;
        case 9: { uint64_t z = 0; reply(&z, 8); break; }
        case 10: { /* forward: cache id, B, T, Tk, last, has_mask */
            int32_t rows = w[4] ? w[1] : w[1] * w[2];
            if (w[0])
                len[w[0] & 63] += w[2];
            int32_t h[3] = {rows, V, w[0] ? len[w[0] & 63] : -1};
            size_t n = 12 + 4 * (size_t)rows * (size_t)V;
            if (!(out = realloc(out, n)))
                return 1;
            memset(out, 0, n); /* zero logits */
            memcpy(out, h, 12);
            reply(out, 12 + 4 * (uint32_t)rows * (uint32_t)V);
            break;
        }
        default: reply(NULL, 0); /* probe, cache_free */
        }
        free(b);
    }
    return 0;
}
