/* Persistent worker threads (private to the engine).
 *
 * One pool per model. eng_threadpool_run() wakes the workers, runs
 * fn(arg, ith, nth) once for every part ith in [0, nth) and returns when all
 * are done. Part 0 runs on the calling thread; parts 1..nth-1 go to whichever
 * thread claims them first (the caller too, once part 0 is done), so a
 * descheduled worker does not stall the step. fn must not assume which
 * thread runs a part. Workers spin briefly before sleeping so that the
 * many small steps of one decode token do not pay a futex round trip each.
 * Not reentrant: one run at a time per pool.
 */
#ifndef ENGINE_THREADPOOL_H
#define ENGINE_THREADPOOL_H

typedef struct eng_threadpool eng_threadpool;
typedef void (*eng_task_fn)(void *arg, int ith, int nth);

int eng_threadpool_new(int n_threads, eng_threadpool **ret_pool);
void eng_threadpool_free(eng_threadpool *pool);
int eng_threadpool_size(const eng_threadpool *pool);
void eng_threadpool_run(eng_threadpool *pool, eng_task_fn fn, void *arg);

/* Splits [0, n) into nth nearly equal parts; part ith is [*ret_begin, *ret_end). */
static inline void eng_split(long n, int ith, int nth, long *ret_begin, long *ret_end)
{
    long per = n / nth, rem = n % nth;
    *ret_begin = ith * per + (ith < rem ? ith : rem);
    *ret_end = *ret_begin + per + (ith < rem ? 1 : 0);
}

#endif
