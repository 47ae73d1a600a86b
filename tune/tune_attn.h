/* Tuning attention (tune.h): the kernel (its tile: queries x KV positions) for one token over a long
 * cache (decode) and the KV split of that token's cache across the threads; the kernel for a block of
 * causal queries (prefill) and the queries per kernel call. Measured on one layer's heads of the model,
 * over caches of its shape rotated over enough layers that a call reads them from where a run would,
 * through the forward pass's own work split (runtime/model/attn_run.h), and timed as the matrices are. */
#ifndef WOOLLY_TUNE_ATTN_H
#define WOOLLY_TUNE_ATTN_H

#include <stdbool.h>

#include "threadpool.h"
#include "tune.h"
#include "tune_measure.h"

/* What the search needs from the tuner's run: its threads, the bytes a run streams between two uses of
 * one layer's cache, and its budget: attention's share ends at `deadline` (woolly_now_s), past which no
 * candidate is tried and an unverified choice gives way to the default; the timing of the next
 * measurement, then counting it. */
typedef struct tune_attn_env {
    woolly_threadpool *pool;
    double rotate_bytes;
    double deadline;
    tune_timing (*timing)(void *ctx, bool prune, double best_s);
    void (*measured)(void *ctx, const char *what);
    void *ctx;
} tune_attn_env;

/* The measurements tune_attn_run plans to make (0 if the model's attention is not tuned: no dimensions
 * known, or no kernel for its cache and head dimension). */
int tune_attn_estimate(const woolly_tune_model *m, const woolly_tune_opts *o);

/* Tunes decode and prefill; adds their rows to r->profile and the cases to r->attn. A model whose
 * attention cannot be tuned leaves r->n_attn at 0 and says why in r->attn_skipped. */
int tune_attn_run(const woolly_tune_model *m, const woolly_tune_opts *o, const tune_attn_env *env,
                  woolly_tune_result *r, woolly_error *err);

#endif
