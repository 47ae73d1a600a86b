/* Timing by the calling thread's CPU time rather than the wall clock, for single-threaded kernel
 * benchmarks on a shared machine: time slices given to other processes do not count, so the figures
 * stay comparable when the machine is busy (cache and memory-bandwidth sharing still show). Grows the
 * iteration count until a sample takes min_sample_s of CPU time, takes `samples` samples, returns the
 * median seconds per call. */
#ifndef WOOLLY_BENCH_CPU_TIME_H
#define WOOLLY_BENCH_CPU_TIME_H

#include <time.h>

static inline double bench_cpu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline double bench_cpu_time(void (*fn)(void *), void *ctx, double min_sample_s, int samples)
{
    double t[32];
    long iters = 1;
    fn(ctx); /* warm-up */
    for (;;) {
        const double t0 = bench_cpu_now_s();
        for (long i = 0; i < iters; i++)
            fn(ctx);
        const double dt = bench_cpu_now_s() - t0;
        if (dt >= min_sample_s || iters > (1L << 30))
            break;
        iters = dt > 0 ? (long)(iters * 1.5 * min_sample_s / dt) + 1 : iters * 10;
    }
    if (samples > 32)
        samples = 32;
    for (int s = 0; s < samples; s++) {
        const double t0 = bench_cpu_now_s();
        for (long i = 0; i < iters; i++)
            fn(ctx);
        t[s] = (bench_cpu_now_s() - t0) / (double)iters;
    }
    for (int a = 1; a < samples; a++) /* insertion sort: a handful of samples */
        for (int b = a; b > 0 && t[b] < t[b - 1]; b--) {
            const double x = t[b];
            t[b] = t[b - 1], t[b - 1] = x;
        }
    return t[samples / 2];
}

#endif
