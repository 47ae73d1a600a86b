/* Honest timing, the way the tuner and the benchmarks measure: warm up, grow the iteration count until
 * one sample takes at least `min_sample_s`, take `samples` samples, keep the median, and never spend
 * more than `max_total_s` (the last sample started before the cap is kept). */
#ifndef WOOLLY_TUNE_TIMING_H
#define WOOLLY_TUNE_TIMING_H

typedef struct woolly_timing {
    double median_s; /* seconds per call */
    double min_s;
    double max_s;
    int samples;     /* samples actually taken */
    long iters;      /* calls per sample */
} woolly_timing;

double woolly_now_s(void); /* monotonic clock */

woolly_timing woolly_time_fn(void (*fn)(void *), void *ctx, double min_sample_s, int samples,
                             double max_total_s);

#endif
