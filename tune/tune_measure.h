/* Measuring one matmul step on one weight shape, through the runtime's own call (packing, thread split,
 * blocking), as a run would make it. */
#ifndef WOOLLY_TUNE_MEASURE_H
#define WOOLLY_TUNE_MEASURE_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "matmul.h"
#include "threadpool.h"

/* Random weights of one type and shape in every layout asked for, each as enough copies that cycling
 * through them reads `rotate_bytes` (at least one copy): the cache state a real run sees when it
 * streams that much weight between two uses of one matrix. Inputs for up to max_m tokens. */
typedef struct tune_weights tune_weights;

tune_weights *tune_weights_open(enum woolly_type type, int64_t rows, int64_t cols, double rotate_bytes,
                                int max_m, woolly_error *err);
void tune_weights_close(tune_weights *w);

typedef struct tune_timing {
    double min_sample_s; /* one sample runs at least this long */
    int samples;         /* the median of this many */
    double cap_s;        /* and no more than this in all, past the first call */
    double prune_s;      /* > 0: stop after the first call if it took longer than this */
} tune_timing;

/* Seconds per call of step s for class c at m tokens (the median of the samples); *pruned when the
 * first call alone exceeded t->prune_s, which is then the time returned (so is a first call that took
 * all of t->cap_s: a call that long is its own sample). -1 with a message if the step does not fit the
 * weights or memory runs out. */
int tune_measure(tune_weights *w, woolly_threadpool *pool, const woolly_matmul_step *s,
                 enum woolly_tokens_class c, int m, const tune_timing *t, double *sec, bool *pruned,
                 woolly_error *err);

#endif
