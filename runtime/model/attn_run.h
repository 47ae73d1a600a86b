/* One layer's causal attention over all its heads, for a batch, split across a thread pool: the work
 * split the forward pass runs (forward.c) and the tuner measures (tune/tune_attn.c), written once so that
 * what is tuned is what runs.
 *
 * A batch of several queries is cut into items (run, KV head, block of q_per_call queries): each thread
 * runs a contiguous stretch of the first three quarters of their cost, then the threads take the rest
 * one item at a time, whichever is free. One token at long context is cut instead
 * into (KV head, chunk of its cache positions) items, so that few KV heads still keep every thread busy;
 * each chunk leaves a partial result (its maximum, sum and unnormalized output) that
 * woolly_attn_combine then merges. */
#ifndef WOOLLY_ATTN_RUN_H
#define WOOLLY_ATTN_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels.h"
#include "kv_cache.h"
#include "registry.h"
#include "threadpool.h"

/* A run of a batch: consecutive tokens of one sequence, at consecutive positions. */
typedef struct woolly_seq_run {
    int32_t row0, n; /* the batch's tokens row0 .. row0 + n - 1 */
    int32_t seq, pos0;
    /* One generated token (n 1): it takes kernel_decode's one-query path, and may split its cache.
     * Every other run takes kernel's tiles, a prompt's token that comes alone included, so that a
     * prompt's logits do not depend on how it was cut into batches. */
    bool generated;
} woolly_seq_run;

/* One layer's attention of a batch: run r's token t (row runs[r].row0 + t of q and out, at position
 * runs[r].pos0 + t) sees its sequence's cache positions 0 .. pos0 + t, or with a sliding window W only
 * pos0 + t - W + 1 .. pos0 + t: the window bounds the kernels' KV loops (and one token's KV chunks), so a
 * sliding layer costs O(W) per token at any depth. The cache's ring for the layer, if it has one, gives
 * the kernels where each position lies. */
typedef struct woolly_attn_layer {
    int32_t n_head, n_head_kv, head_dim; /* n_head a multiple of n_head_kv: a group of query heads per
                                            KV head */
    float scale;                         /* applied to q.k before the softmax */
    const float *q;                      /* [rows][n_head * head_dim] queries, heads concatenated */
    float *out;                          /* [rows][n_head * head_dim] attention outputs, likewise */
    const woolly_seq_run *runs;
    int32_t n_runs;
    const woolly_kv_cache *kv; /* keys and values: head h of run r at woolly_kv_cache_k/v(kv, layer,
                                  runs[r].seq, h) */
    int32_t layer;
    int32_t window;                     /* 0: a global layer; else the layer's sliding window */
    const woolly_kernel *kernel;        /* for a prompt's run, of one query or several (prefill) */
    const woolly_kernel *kernel_decode; /* for a generated token (decode) */
    int32_t q_per_call;                 /* queries per kernel call of a run */
    int32_t decode_l2_blocks;           /* kernel_decode's L2 prefetch (woolly_attn_args) */
    /* 1: no split. Else the batch is one generated token (one run) whose visible cache positions (its
     * window's, with one) are split into n_split (<= WOOLLY_ATTN_MAX_PARTS) chunks per KV head, each
     * leaving its partial result in part and ml. */
    int32_t n_split;
    float *part; /* [n_split][n_head * head_dim] unnormalized partial outputs */
    float *ml;   /* [n_split][n_head][2] their running maxima and sums */
} woolly_attn_layer;

/* The threads of the pool worth waking for this attention (by its multiply-adds). */
int woolly_attn_threads(const woolly_threadpool *pool, const woolly_attn_layer *a);

/* The KV chunks per head one token's attention over n_kv cache positions is split into on nth threads:
 * `chosen` (a tuning profile's), or with 0 enough that the n_head_kv * chunks items divide evenly among
 * the threads (none when they already do); fewer while a chunk would be short; at most max_parts. */
int32_t woolly_attn_kv_split(int32_t n_head_kv, int nth, int64_t n_kv, int32_t chosen, int32_t max_parts);

/* The cache positions the token at pos sees through a window (0: all): its first is pos + 1 - that. */
static inline int64_t woolly_attn_visible(int64_t pos, int32_t window)
{
    return window > 0 && pos + 1 > window ? window : pos + 1;
}

/* Runs the attention on nth threads of the pool (woolly_attn_threads), every kernel call through
 * woolly_attn_call; with a split, merges the partial results into out. */
void woolly_attn_run(woolly_threadpool *pool, const woolly_attn_layer *a, int nth);

/* Every attention kernel call goes through here: observed (tests check that a profile's attention
 * choices reach the kernel), then run. The observer, when set, is called on the calling thread (ith of
 * nth) before the kernel. */
typedef void (*woolly_attn_observer)(const woolly_kernel *k, const woolly_attn_args *a, int ith, int nth);
void woolly_attn_set_observer(woolly_attn_observer fn);
void woolly_attn_call(const woolly_kernel *k, const woolly_attn_args *a, int ith, int nth);

#endif
