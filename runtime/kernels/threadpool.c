#include "threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "isa.h"

/* Jobs in a forward pass come in quick succession (a few per layer), so a thread that has just finished
 * one spins before sleeping on the condition variable: waking a sleeping thread costs tens of
 * microseconds, and a gap between two jobs (one thread's share of a matmul ending before the other's, the
 * serial work between layers) can be longer than that. The spin is bounded in time, not in pauses, whose
 * length differs several-fold between cores. */
enum { SPIN_NS = 300000, SPIN_CHECK = 32 /* pauses between two reads of the clock */ };

typedef struct worker {
    woolly_threadpool *pool;
    int ith;
    pthread_t thread;
} worker;

struct woolly_threadpool {
    int n;
    uint64_t spin_ns; /* SPIN_NS, or 0 when the threads outnumber the CPUs: a spinning thread would
                         hold a CPU that one with work needs */
    worker *workers; /* n - 1 of them; the caller of run is thread 0 */

    pthread_mutex_t lock;
    pthread_cond_t wake; /* generation changed or stop */
    pthread_cond_t done; /* pending reached 0 */

    woolly_job_fn fn;
    void *arg;
    int n_use;              /* threads taking part in the current job */
    atomic_uint generation; /* bumped once per job */
    atomic_int pending;     /* workers still running the current job */
    atomic_bool stop;
};

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* One pause of a spin; false once the spin has lasted the pool's spin_ns. */
typedef struct spin {
    unsigned n;
    uint64_t until;
} spin;

static bool spin_on(spin *s, const woolly_threadpool *p)
{
    if (!p->spin_ns)
        return false;
    woolly_cpu_relax();
    if (++s->n % SPIN_CHECK)
        return true;
    const uint64_t t = now_ns();
    if (!s->until)
        s->until = t + p->spin_ns;
    return t < s->until;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    woolly_threadpool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g = atomic_load(&p->generation);
        for (spin s = {0}; g == seen && !atomic_load(&p->stop) && spin_on(&s, p);)
            g = atomic_load(&p->generation);
        if (g == seen) {
            pthread_mutex_lock(&p->lock);
            while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->lock);
            pthread_mutex_unlock(&p->lock);
        }
        if (atomic_load(&p->stop))
            return NULL;
        seen = g;
        if (w->ith < p->n_use) {
            woolly_isa_thread_init(); /* a job may run kernels: once per thread, then a flag's test */
            p->fn(p->arg, w->ith, p->n_use);
        }
        if (atomic_fetch_sub(&p->pending, 1) == 1) {
            pthread_mutex_lock(&p->lock);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->lock);
        }
    }
}

woolly_threadpool *woolly_threadpool_open(int n_threads, woolly_error *err)
{
    if (n_threads < 1 || n_threads > WOOLLY_MAX_THREADS) {
        woolly_fail(err, "thread count %d is out of range [1, %d]", n_threads, WOOLLY_MAX_THREADS);
        return NULL;
    }
    woolly_threadpool *p = calloc(1, sizeof *p);
    if (!p) {
        woolly_fail(err, "out of memory for the thread pool");
        return NULL;
    }
    p->n = n_threads;
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    p->spin_ns = cpus > 0 && n_threads > cpus ? 0 : SPIN_NS;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->stop, false);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            woolly_threadpool_close(p);
            woolly_fail(err, "out of memory for %d worker threads", n_threads - 1);
            return NULL;
        }
    }
    for (int i = 1; i < n_threads; i++) {
        worker *w = &p->workers[i - 1];
        w->pool = p;
        w->ith = i;
        int rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc != 0) {
            p->n = i; /* close joins only the threads that started */
            woolly_threadpool_close(p);
            woolly_fail(err, "cannot start worker thread %d of %d (error %d)", i, n_threads, rc);
            return NULL;
        }
    }
    return p;
}

void woolly_threadpool_close(woolly_threadpool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 1; i < p->n; i++)
        pthread_join(p->workers[i - 1].thread, NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p->workers);
    free(p);
}

int woolly_threadpool_size(const woolly_threadpool *p)
{
    return p->n;
}

void woolly_threadpool_run(woolly_threadpool *p, woolly_job_fn fn, void *arg)
{
    woolly_threadpool_run_n(p, fn, arg, p->n);
}

int woolly_threads_for(const woolly_threadpool *p, double work, double min_per_thread)
{
    const double n = work / min_per_thread;
    return n >= p->n ? p->n : n < 1.0 ? 1 : (int)n;
}

void woolly_threadpool_run_n(woolly_threadpool *p, woolly_job_fn fn, void *arg, int n_use)
{
    if (n_use > p->n)
        n_use = p->n;
    woolly_isa_thread_init(); /* the caller is thread 0 */
    if (n_use <= 1) {
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->arg = arg;
    p->n_use = n_use;
    atomic_store(&p->pending, p->n - 1);
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);

    fn(arg, 0, n_use);

    for (spin s = {0}; atomic_load(&p->pending) > 0 && spin_on(&s, p);)
        ;
    if (atomic_load(&p->pending) > 0) {
        pthread_mutex_lock(&p->lock);
        while (atomic_load(&p->pending) > 0)
            pthread_cond_wait(&p->done, &p->lock);
        pthread_mutex_unlock(&p->lock);
    }
}

void woolly_split_range(long long n, int align, int ith, int nth, long long *lo, long long *hi)
{
    if (align < 1)
        align = 1;
    const long long units = (n + align - 1) / align;
    long long a = units * ith / nth * align, b = units * (ith + 1) / nth * align;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}
