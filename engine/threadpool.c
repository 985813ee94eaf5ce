/* Persistent worker threads.
 *
 * A run has nth parts, ith = 0 .. nth-1; fn(arg, ith, nth) is called exactly
 * once for each. The caller always runs part 0; parts 1 .. nth-1 are claimed
 * by whichever thread gets there first: normally the workers, one part
 * each, and the caller itself once it has finished part 0. So when a
 * worker is late (asleep, or its core busy with another process) the caller
 * does that part instead of waiting a scheduler time slice for it: the run
 * never takes much longer than doing all of it on the calling thread.
 *
 * Protocol:
 *   caller: fn, arg = ... (relaxed atomics); done = 0;
 *           claim = (g << 32) | 1 (release); gen = g (seq_cst); if sleepers:
 *           lock, broadcast, unlock; fn(arg, 0, n); claim and run parts
 *           while any are left; wait until done == n - 1 (acquire).
 *   worker: wait until gen != seen (spin, then yield, then sleep on the
 *           condition variable); then claim parts with a CAS on claim
 *           (acquire: fn/arg of that generation are visible), run each,
 *           done += 1 (release).
 *
 * The caller writes fn/arg/done for the next run only after every part of
 * this run is done, and a worker reads fn/arg only after claiming a part
 * that is not done yet, so it always reads the values of the generation it
 * claimed in. A worker that wakes after the run is over finds claim's
 * generation or count exhausted and goes back to waiting.
 *
 * Sleeping uses a Dekker pattern with sequentially consistent operations: a
 * worker increments n_sleeping and then re-reads gen under the mutex; the
 * caller stores gen and then reads n_sleeping. At least one of the two sees
 * the other's store, so either the worker does not sleep or the caller
 * broadcasts (taking the mutex, which the worker holds from its check until
 * it is inside pthread_cond_wait). No wake-up is lost.
 */
#include "threadpool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

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
    pthread_t thread;
} worker;

struct eng_threadpool {
    int n_threads;
    int n_started; /* workers actually created (for cleanup on failure) */
    int spin;      /* pause iterations before yielding: 0 when oversubscribed */
    worker *workers;

    _Atomic(eng_task_fn) fn;
    _Atomic(void *) arg;
    _Atomic uint64_t claim; /* generation << 32 | next part to claim */
    _Atomic int done;       /* parts 1 .. n-1 finished in this run */
    _Atomic unsigned gen;
    _Atomic int n_sleeping;
    _Atomic bool stop;

    pthread_mutex_t mu;
    pthread_cond_t cv;
};

/* Waits until pool->gen differs from seen; returns the new value. */
static unsigned wait_for_gen(struct eng_threadpool *pool, unsigned seen)
{
    unsigned g;
    for (int i = 0; i < pool->spin; i++) {
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
    atomic_fetch_add(&pool->n_sleeping, 1); /* seq_cst: pairs with publish() */
    while ((g = atomic_load(&pool->gen)) == seen)
        pthread_cond_wait(&pool->cv, &pool->mu);
    atomic_fetch_sub(&pool->n_sleeping, 1);
    pthread_mutex_unlock(&pool->mu);
    return g;
}

/* Claims and runs parts of the current run until none are left. */
static void run_parts(struct eng_threadpool *pool)
{
    int n = pool->n_threads;
    uint64_t c = atomic_load_explicit(&pool->claim, memory_order_acquire);
    for (;;) {
        if ((int)(uint32_t)c >= n)
            return;
        if (!atomic_compare_exchange_weak_explicit(&pool->claim, &c, c + 1, memory_order_acquire,
                                                   memory_order_acquire))
            continue; /* c now holds the current value */
        int ith = (int)(uint32_t)c;
        eng_task_fn fn = atomic_load_explicit(&pool->fn, memory_order_relaxed);
        void *arg = atomic_load_explicit(&pool->arg, memory_order_relaxed);
        fn(arg, ith, n);
        atomic_fetch_add_explicit(&pool->done, 1, memory_order_release);
        c = atomic_load_explicit(&pool->claim, memory_order_acquire);
    }
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
        run_parts(pool);
    }
    return NULL;
}

/* Publishes a new generation and wakes sleepers. */
static void publish(struct eng_threadpool *pool)
{
    atomic_fetch_add(&pool->gen, 1); /* seq_cst */
    if (atomic_load(&pool->n_sleeping) > 0) {
        pthread_mutex_lock(&pool->mu);
        pthread_cond_broadcast(&pool->cv);
        pthread_mutex_unlock(&pool->mu);
    }
}

static void stop_workers(struct eng_threadpool *pool)
{
    atomic_store_explicit(&pool->stop, true, memory_order_release);
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
    /* With more threads than CPUs a spinning thread only delays the one it
     * waits for: go straight to yielding. */
    long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    pool->spin = (n_cpu > 0 && n_threads > n_cpu) ? 0 : SPIN_PAUSES;
    atomic_init(&pool->fn, NULL);
    atomic_init(&pool->arg, NULL);
    /* generation 0, nothing to claim */
    atomic_init(&pool->claim, (uint64_t)n_threads);
    atomic_init(&pool->done, 0);
    atomic_init(&pool->gen, 0);
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

    atomic_store_explicit(&pool->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&pool->arg, arg, memory_order_relaxed);
    atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
    uint64_t g = (uint64_t)(uint32_t)(atomic_load_explicit(&pool->gen, memory_order_relaxed) + 1);
    atomic_store_explicit(&pool->claim, g << 32 | 1, memory_order_release);
    publish(pool);

    fn(arg, 0, n);
    run_parts(pool); /* parts no worker has picked up yet */

    /* Parts still running on workers finish within microseconds of ours in
     * balanced runs; yield after a while in case a worker was descheduled. */
    int spins = 0;
    while (atomic_load_explicit(&pool->done, memory_order_acquire) != n - 1) {
        if (++spins < pool->spin)
            cpu_relax();
        else
            sched_yield();
    }
}
