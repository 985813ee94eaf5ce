/* Persistent worker threads.
 *
 * Protocol (one run):
 *   caller: fn/arg = ...; n_done = 0; gen += 1 (seq_cst); if n_sleeping > 0:
 *           lock, broadcast, unlock; fn(arg, 0, n); wait until n_done == n - 1.
 *   worker: wait until gen != seen (spin, then yield, then sleep on the
 *           condition variable); seen = gen; fn(arg, ith, n); n_done += 1.
 *
 * The plain fields fn/arg are published by the release half of the gen store
 * and read after the acquire half of the worker's gen load; the caller writes
 * them again only after seeing every worker's n_done increment (release /
 * acquire), so there is no data race on them.
 *
 * Sleeping uses a Dekker pattern with sequentially consistent operations: a
 * worker increments n_sleeping and then re-reads gen under the mutex; the
 * caller stores gen and then reads n_sleeping. At least one of the two sees
 * the other's store, so either the worker does not sleep or the caller
 * broadcasts (taking the mutex, which the worker holds from its check until
 * it is inside pthread_cond_wait). No wake-up can be lost.
 */
#include "threadpool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

/* Spin budget before yielding / sleeping. One decode step issues a few hundred
 * runs tens of microseconds apart; a pause is ~10-140 cycles depending on the
 * core, so this keeps workers hot for roughly 0.1-1 ms between runs. */
#define SPIN_PAUSES 20000
#define SPIN_YIELDS 64

enum { ENG_THREADPOOL_MAX = 1024 };

typedef struct worker {
    struct eng_threadpool *pool;
    int ith;
    pthread_t thread;
} worker;

struct eng_threadpool {
    int n_threads;
    int n_started; /* workers actually created (for cleanup on failure) */
    worker *workers;

    /* Written by the caller before publishing gen; see the protocol above. */
    eng_task_fn fn;
    void *arg;

    _Atomic unsigned gen;
    _Atomic int n_done;
    _Atomic int n_sleeping;
    _Atomic bool stop;

    pthread_mutex_t mu;
    pthread_cond_t cv;
};

/* Waits until pool->gen differs from seen; returns the new value. */
static unsigned wait_for_gen(struct eng_threadpool *pool, unsigned seen)
{
    unsigned g;
    for (int i = 0; i < SPIN_PAUSES; i++) {
        g = atomic_load_explicit(&pool->gen, memory_order_acquire);
        if (g != seen)
            return g;
        cpu_relax();
    }
    for (int i = 0; i < SPIN_YIELDS; i++) {
        g = atomic_load_explicit(&pool->gen, memory_order_acquire);
        if (g != seen)
            return g;
        sched_yield();
    }
    pthread_mutex_lock(&pool->mu);
    atomic_fetch_add(&pool->n_sleeping, 1); /* seq_cst: pairs with the caller's */
    while ((g = atomic_load(&pool->gen)) == seen)
        pthread_cond_wait(&pool->cv, &pool->mu);
    atomic_fetch_sub(&pool->n_sleeping, 1);
    pthread_mutex_unlock(&pool->mu);
    return g;
}

static void *worker_main(void *p)
{
    worker *w = p;
    struct eng_threadpool *pool = w->pool;
    unsigned seen = 0; /* gen starts at 0 and the first run makes it 1 */

    for (;;) {
        seen = wait_for_gen(pool, seen);
        if (atomic_load_explicit(&pool->stop, memory_order_acquire))
            break;
        pool->fn(pool->arg, w->ith, pool->n_threads);
        atomic_fetch_add_explicit(&pool->n_done, 1, memory_order_release);
    }
    return NULL;
}

/* Publishes a new generation and wakes sleepers. */
static void publish(struct eng_threadpool *pool)
{
    atomic_fetch_add(&pool->gen, 1); /* seq_cst, release for fn/arg/stop */
    if (atomic_load(&pool->n_sleeping) > 0) {
        pthread_mutex_lock(&pool->mu);
        pthread_cond_broadcast(&pool->cv);
        pthread_mutex_unlock(&pool->mu);
    }
}

static void stop_workers(struct eng_threadpool *pool)
{
    atomic_store_explicit(&pool->stop, true, memory_order_relaxed);
    publish(pool);
    for (int i = 0; i < pool->n_started; i++)
        pthread_join(pool->workers[i].thread, NULL);
    pool->n_started = 0;
}

int eng_threadpool_new(int n_threads, eng_threadpool **ret_pool)
{
    if (!ret_pool || n_threads < 1 || n_threads > ENG_THREADPOOL_MAX)
        return -EINVAL;

    struct eng_threadpool *pool = calloc(1, sizeof(*pool));
    if (!pool)
        return -ENOMEM;
    pool->n_threads = n_threads;
    atomic_init(&pool->gen, 0);
    atomic_init(&pool->n_done, 0);
    atomic_init(&pool->n_sleeping, 0);
    atomic_init(&pool->stop, false);

    int r = pthread_mutex_init(&pool->mu, NULL);
    if (r != 0) {
        free(pool);
        return -r;
    }
    r = pthread_cond_init(&pool->cv, NULL);
    if (r != 0) {
        pthread_mutex_destroy(&pool->mu);
        free(pool);
        return -r;
    }

    if (n_threads > 1) {
        pool->workers = calloc((size_t)n_threads - 1, sizeof(worker));
        if (!pool->workers) {
            eng_threadpool_free(pool);
            return -ENOMEM;
        }
        for (int i = 0; i < n_threads - 1; i++) {
            pool->workers[i].pool = pool;
            pool->workers[i].ith = i + 1;
            r = pthread_create(&pool->workers[i].thread, NULL, worker_main, &pool->workers[i]);
            if (r != 0) {
                eng_threadpool_free(pool);
                return -r;
            }
            pool->n_started++;
        }
    }
    *ret_pool = pool;
    return 0;
}

void eng_threadpool_free(eng_threadpool *pool)
{
    if (!pool)
        return;
    stop_workers(pool);
    pthread_cond_destroy(&pool->cv);
    pthread_mutex_destroy(&pool->mu);
    free(pool->workers);
    free(pool);
}

int eng_threadpool_size(const eng_threadpool *pool)
{
    return pool ? pool->n_threads : 0;
}

void eng_threadpool_run(eng_threadpool *pool, eng_task_fn fn, void *arg)
{
    if (!pool || !fn)
        return;
    int n = pool->n_threads;
    if (n == 1) {
        fn(arg, 0, 1);
        return;
    }

    pool->fn = fn;
    pool->arg = arg;
    atomic_store_explicit(&pool->n_done, 0, memory_order_relaxed);
    publish(pool);

    fn(arg, 0, n);

    /* The caller waits hot: the workers finish within microseconds of it in
     * balanced runs; yield after a while in case a worker was descheduled. */
    int spins = 0;
    while (atomic_load_explicit(&pool->n_done, memory_order_acquire) != n - 1) {
        if (++spins < SPIN_PAUSES)
            cpu_relax();
        else
            sched_yield();
    }
}
