/* Thread pool: every part index runs exactly once per run (part 0 on the
 * calling thread; the others on whichever thread claims them), sees the
 * run's argument and the caller's writes made before the run, and its
 * writes are visible to the caller after the run; this holds for hot runs
 * (workers spinning) and for runs after idle pauses (workers asleep).
 * Construction rejects bad sizes; free joins workers in either state.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "threadpool.h"

enum { MAX_T = 4 };

typedef struct job {
    long round;          /* written by the caller before each run */
    long seen[MAX_T];    /* plain writes by each thread */
    _Atomic int hits[MAX_T];
    int nth_seen[MAX_T];
    pthread_t caller;
    _Atomic int not_caller; /* part 0 ran on another thread */
    _Atomic long on_workers; /* parts run off the calling thread */
} job;

static void task(void *p, int ith, int nth)
{
    job *j = p;
    if (ith < 0 || ith >= MAX_T)
        return;
    atomic_fetch_add_explicit(&j->hits[ith], 1, memory_order_relaxed);
    j->seen[ith] = j->round; /* plain write: the run's end must publish it */
    j->nth_seen[ith] = nth;
    if (ith == 0 && !pthread_equal(pthread_self(), j->caller))
        atomic_store(&j->not_caller, 1);
    if (!pthread_equal(pthread_self(), j->caller))
        atomic_fetch_add(&j->on_workers, 1);
    /* a few microseconds of work, so that workers get to claim parts */
    volatile unsigned spin = 0;
    for (int i = 0; i < 2000; i++)
        spin += (unsigned)i;
}

static void nap_us(long us)
{
    struct timespec ts = { 0, us * 1000 };
    nanosleep(&ts, NULL);
}

static int check_pool(int n, long rounds, int nap_every)
{
    eng_threadpool *pool = NULL;
    if (eng_threadpool_new(n, &pool) < 0 || !pool || eng_threadpool_size(pool) != n) {
        fprintf(stderr, "new(%d) failed\n", n);
        return 1;
    }
    job *j = calloc(1, sizeof(*j));
    j->caller = pthread_self();
    for (long r = 1; r <= rounds; r++) {
        j->round = r;
        if (nap_every && r % nap_every == 0)
            nap_us(3000); /* long enough for workers to fall asleep */
        eng_threadpool_run(pool, task, j);
        for (int i = 0; i < n; i++) {
            if (atomic_load(&j->hits[i]) != r || j->seen[i] != r || j->nth_seen[i] != n) {
                fprintf(stderr, "n=%d round %ld thread %d: hits %d seen %ld nth %d\n", n, r, i,
                        atomic_load(&j->hits[i]), j->seen[i], j->nth_seen[i]);
                free(j);
                eng_threadpool_free(pool);
                return 1;
            }
        }
        if (atomic_load(&j->not_caller)) {
            fprintf(stderr, "n=%d: part 0 ran off the calling thread\n", n);
            return 1;
        }
        for (int i = n; i < MAX_T; i++)
            if (atomic_load(&j->hits[i]) != 0) {
                fprintf(stderr, "n=%d: thread index %d ran\n", n, i);
                return 1;
            }
    }
    if (!nap_every)
        printf("%d threads: %ld of %ld parts ran on workers\n", n, atomic_load(&j->on_workers),
               rounds * (n - 1));
    free(j);
    if (nap_every)
        nap_us(5000); /* free while the workers sleep */
    eng_threadpool_free(pool);
    return 0;
}

int main(void)
{
    eng_threadpool *p = NULL;
    if (eng_threadpool_new(0, &p) != -EINVAL || eng_threadpool_new(-3, &p) != -EINVAL ||
        eng_threadpool_new(2, NULL) != -EINVAL || p != NULL) {
        fprintf(stderr, "bad sizes accepted\n");
        return 1;
    }
    eng_threadpool_free(NULL);
    eng_threadpool_run(NULL, task, NULL);
    for (int n = 1; n <= MAX_T; n++) {
        if (check_pool(n, 3000, 0) || check_pool(n, 60, 7) || check_pool(n, 40, 1))
            return 1;
        printf("%d threads ok\n", n);
    }
    /* free right after creation, workers never ran */
    if (eng_threadpool_new(3, &p) < 0)
        return 1;
    eng_threadpool_free(p);
    return 0;
}
