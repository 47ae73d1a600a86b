#include "timing.h"

#include <stdlib.h>
#include <time.h>

double woolly_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

woolly_timing woolly_time_fn(void (*fn)(void *), void *ctx, double min_sample_s, int samples,
                             double max_total_s)
{
    enum { MAX_SAMPLES = 64 };
    double t[MAX_SAMPLES];
    woolly_timing r = {0};
    if (samples < 1)
        samples = 1;
    if (samples > MAX_SAMPLES)
        samples = MAX_SAMPLES;

    double start = woolly_now_s();
    fn(ctx); /* warm-up: page faults, caches, branch predictors */

    long iters = 1;
    for (;;) { /* grow until one sample is long enough to time */
        double t0 = woolly_now_s();
        for (long i = 0; i < iters; i++)
            fn(ctx);
        double dt = woolly_now_s() - t0;
        if (dt >= min_sample_s || woolly_now_s() - start > max_total_s / 4)
            break;
        iters *= 2;
    }
    int n = 0;
    while (n < samples && (n == 0 || woolly_now_s() - start < max_total_s)) {
        double t0 = woolly_now_s();
        for (long i = 0; i < iters; i++)
            fn(ctx);
        t[n++] = (woolly_now_s() - t0) / (double)iters;
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    r.samples = n;
    r.iters = iters;
    r.min_s = t[0];
    r.max_s = t[n - 1];
    r.median_s = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    return r;
}
