/* ref's worker threads: a pool per model handle (opts->threads, the caller
 * included) that splits a task's items into contiguous chunks, one per
 * thread. ref splits work by output element (a row of W, a query head) or
 * by the lanes of a dot product's 8 partial sums (each lane's adds in order
 * on one thread, the lanes then added in dot()'s order), never elsewhere
 * inside a reduction, so every value is computed by the same code in the
 * same order whatever the thread count: results are bit-identical for any
 * --threads. Included through ref_model.h by ref.c (create, free) and
 * ref_forward.c (run): static inline, so each file keeps what it uses. */
#ifndef GENFENCE_REF_POOL_H
#define GENFENCE_REF_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

enum { REF_MAX_THREADS = 256 };

/* fn(arg, lo, hi, thread): items [lo, hi) on thread index `thread` (0 = caller). */
typedef void (*ref_task_fn)(void *arg, int64_t lo, int64_t hi, int thread);

typedef struct ref_pool ref_pool;

typedef struct ref_worker {
    ref_pool *pool;
    int idx;
    pthread_t tid;
} ref_worker;

struct ref_pool {
    int n;               /* threads, the caller included (>= 1) */
    ref_worker *workers; /* (n - 1) */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    atomic_ulong epoch; /* bumped once per task (under mu, after the task's fields) */
    atomic_int running; /* workers not yet done with this epoch's task */
    atomic_int stop;
    ref_task_fn fn;
    void *arg;
    int64_t n_items;
};

/* A decode step is dozens of short tasks with a little serial work between
 * them: a sleeping worker takes a futex wake-up (tens of microseconds) per
 * task, so a worker, and the caller waiting for the workers, first polls for
 * about REF_SPIN polls (a pause each: some hundred microseconds), then
 * sleeps on the condition variable as before. A pool of one thread never
 * spins. */
#define REF_SPIN 4000

static inline void ref_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline void ref_chunk(int64_t n, int parts, int i, int64_t *lo, int64_t *hi)
{
    *lo = n * i / parts;
    *hi = n * (i + 1) / parts;
}

static inline void *ref_pool_worker(void *a)
{
    ref_worker *w = a;
    ref_pool *p = w->pool;
    unsigned long seen = 0;
    for (;;) {
        for (int s = 0; s < REF_SPIN && atomic_load_explicit(&p->epoch, memory_order_acquire) == seen &&
                        !atomic_load_explicit(&p->stop, memory_order_relaxed);
             s++)
            ref_cpu_relax();
        if (atomic_load_explicit(&p->epoch, memory_order_acquire) == seen) {
            pthread_mutex_lock(&p->mu);
            while (!atomic_load(&p->stop) && atomic_load(&p->epoch) == seen)
                pthread_cond_wait(&p->go, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop))
            break;
        seen = atomic_load_explicit(&p->epoch, memory_order_acquire);
        int64_t lo, hi;
        ref_chunk(p->n_items, p->n, w->idx, &lo, &hi);
        if (lo < hi)
            p->fn(p->arg, lo, hi, w->idx);
        if (atomic_fetch_sub_explicit(&p->running, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

static inline void ref_pool_free(ref_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n - 1; i++)
        pthread_join(p->workers[i].tid, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->workers);
    free(p);
}

/* A pool of `threads` (clamped to [1, REF_MAX_THREADS]); fewer when a thread
 * cannot be started. NULL when out of memory. */
static inline ref_pool *ref_pool_create(int threads)
{
    if (threads < 1)
        threads = 1;
    if (threads > REF_MAX_THREADS)
        threads = REF_MAX_THREADS;
    ref_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n = 1;
    atomic_init(&p->epoch, 0);
    atomic_init(&p->running, 0);
    atomic_init(&p->stop, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    if (threads > 1) {
        p->workers = calloc((size_t)threads - 1, sizeof *p->workers);
        if (!p->workers) {
            ref_pool_free(p);
            return NULL;
        }
        for (int i = 1; i < threads; i++) {
            ref_worker *w = &p->workers[i - 1];
            w->pool = p;
            w->idx = i;
            if (pthread_create(&w->tid, NULL, ref_pool_worker, w) != 0)
                break;
            p->n = i + 1;
        }
    }
    return p;
}

/* Below this many multiply-adds a task runs on the caller alone: waking the
 * workers costs more than it saves. */
#define REF_PAR_MIN_WORK 200000.0

/* Run fn over [0, n_items), split among the pool's threads. */
static inline void ref_pool_run(ref_pool *p, ref_task_fn fn, void *arg, int64_t n_items, double work)
{
    if (n_items < 1)
        return;
    if (!p || p->n == 1 || n_items < 2 || work < REF_PAR_MIN_WORK) {
        fn(arg, 0, n_items, 0);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    p->n_items = n_items;
    atomic_store_explicit(&p->running, p->n - 1, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->epoch, 1, memory_order_release);
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    int64_t lo, hi;
    ref_chunk(n_items, p->n, 0, &lo, &hi);
    if (lo < hi)
        fn(arg, lo, hi, 0);
    for (int s = 0; s < REF_SPIN && atomic_load_explicit(&p->running, memory_order_acquire); s++)
        ref_cpu_relax();
    if (atomic_load_explicit(&p->running, memory_order_acquire)) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->running))
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

#endif
