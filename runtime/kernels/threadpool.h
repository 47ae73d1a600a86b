/* One persistent pool of worker threads per context. A job is a function run once on every thread of
 * the pool (the caller is thread 0), each told its index and the thread count, so that it can take its
 * share of the work; woolly_threadpool_run returns when every thread has finished. Running a job
 * allocates nothing, so a forward pass can use the pool freely. */
#ifndef WOOLLY_THREADPOOL_H
#define WOOLLY_THREADPOOL_H

#include "error.h"

#define WOOLLY_MAX_THREADS 1024

typedef struct woolly_threadpool woolly_threadpool;

/* One pause of a spin-wait loop: eases the core for its sibling and the memory system. */
static inline void woolly_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

typedef void (*woolly_job_fn)(void *arg, int ith, int nth);

/* n_threads in [1, WOOLLY_MAX_THREADS]; starts n_threads - 1 workers. */
woolly_threadpool *woolly_threadpool_open(int n_threads, woolly_error *err);
void woolly_threadpool_close(woolly_threadpool *p);

int woolly_threadpool_size(const woolly_threadpool *p);

/* Runs fn(arg, i, n) for i in [0, n) on the pool's n threads and waits for all of them. Not reentrant:
 * one job at a time per pool (a job must not run another job on the same pool). */
void woolly_threadpool_run(woolly_threadpool *p, woolly_job_fn fn, void *arg);

/* The same on the first n_use threads only (clamped to [1, size]): a job too small to repay waking
 * the other threads runs on fewer, and with n_use == 1 directly on the caller. */
void woolly_threadpool_run_n(woolly_threadpool *p, woolly_job_fn fn, void *arg, int n_use);

/* Threads worth using for `work` units when each thread should get at least `min_per_thread`. */
int woolly_threads_for(const woolly_threadpool *p, double work, double min_per_thread);

/* The share [*lo, *hi) of thread ith out of nth of n items, in units of `align` items (the last share
 * takes the remainder), so that consecutive threads get contiguous, nearly equal ranges. */
void woolly_split_range(long long n, int align, int ith, int nth, long long *lo, long long *hi);

#endif
