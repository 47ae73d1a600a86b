/* One layer's attention split across the threads (attn_run.h). */
#include "attn_run.h"

#include <math.h>

/* Multiply-adds below which another thread does not pay for waking it. */
#define ATTN_MIN_WORK_PER_THREAD 65536.0
/* Cache positions below which one token's KV range is not worth splitting across threads. */
#define ATTN_MIN_SPLIT_POSITIONS 256

/* The kernel arguments for KV head h and queries [t0, t0 + nq) of run r over its sequence's cache
 * [kv0, kv1). */
static woolly_attn_args head_args(const woolly_attn_layer *a, const woolly_seq_run *r, int32_t h, int32_t t0,
                                  int32_t nq, int64_t kv0, int64_t kv1)
{
    const int32_t hd = a->head_dim, group = a->n_head / a->n_head_kv;
    const size_t q_dim = (size_t)a->n_head * hd,
                 first_q = (size_t)(r->row0 + t0) * q_dim + (size_t)h * group * hd;
    return (woolly_attn_args){
        .q = a->q + first_q,
        .q_stride = (size_t)hd,
        .q_row_stride = q_dim,
        .k = woolly_kv_cache_k(a->kv, a->layer, r->seq, h),
        .v = woolly_kv_cache_v(a->kv, a->layer, r->seq, h),
        .kv_row_bytes = a->kv->head_bytes,
        .n_q = nq,
        .pos0 = r->pos0 + t0,
        .kv0 = kv0,
        .kv1 = kv1,
        .head_dim = hd,
        .n_group = group,
        .scale = a->scale,
        .out = a->out + first_q,
        .out_stride = (size_t)hd,
        .out_row_stride = q_dim,
        .ml = NULL,
    };
}

/* The positions run r's queries see, summed over its blocks of q_block queries (a block costs the
 * positions its last query sees, so the early blocks of a causal prompt are cheap). */
static double run_cost(const woolly_seq_run *r, int32_t q_block)
{
    double total = 0.0;
    for (int32_t t0 = 0; t0 < r->n; t0 += q_block)
        total += (double)r->pos0 + (r->n - t0 < q_block ? r->n : t0 + q_block);
    return total;
}

/* A batch: the items (run, KV head, block of q_per_call queries), run- then head-major, split across the
 * threads in contiguous stretches of nearly equal cost. */
static void batch_run(void *arg, int ith, int nth)
{
    const woolly_attn_layer *a = arg;
    const int32_t qb = a->q_per_call;
    double total = 0.0;
    for (int32_t r = 0; r < a->n_runs; r++)
        total += run_cost(&a->runs[r], qb);
    total *= a->n_head_kv;
    const double lo = total * ith / nth, hi = total * (ith + 1) / nth;
    double at = 0.0;
    for (int32_t r = 0; r < a->n_runs; r++) {
        const woolly_seq_run *run = &a->runs[r];
        if (at + run_cost(run, qb) * a->n_head_kv < lo) { /* all of this run is before ours */
            at += run_cost(run, qb) * a->n_head_kv;
            continue;
        }
        for (int32_t h = 0; h < a->n_head_kv && at < hi; h++)
            for (int32_t t0 = 0; t0 < run->n; t0 += qb) {
                const int32_t nq = run->n - t0 < qb ? run->n - t0 : qb;
                const double cost = (double)run->pos0 + t0 + nq, mid = at + cost / 2;
                at += cost;
                if (mid < lo || mid >= hi)
                    continue;
                const woolly_attn_args args = head_args(a, run, h, t0, nq, 0, (int64_t)run->pos0 + t0 + nq);
                woolly_attn_call(run->n == 1 ? a->kernel_decode : a->kernel, &args, ith, nth);
            }
        if (at >= hi)
            break;
    }
}

/* One token: the items (KV head, chunk of its cache positions), n_head_kv * n_split of them, split evenly
 * across the threads; each chunk leaves a partial result in part / ml (an empty chunk, when there are
 * more chunks than positions, one that says so: m = -inf, l = 0). */
static void split_run(void *arg, int ith, int nth)
{
    const woolly_attn_layer *a = arg;
    const int32_t group = a->n_head / a->n_head_kv, q_dim = a->n_head * a->head_dim, n_split = a->n_split;
    const woolly_seq_run *run = &a->runs[0];
    const int64_t n_kv = (int64_t)run->pos0 + 1;
    long long lo, hi;
    woolly_split_range((long long)a->n_head_kv * n_split, 1, ith, nth, &lo, &hi);
    for (long long idx = lo; idx < hi; idx++) {
        const int32_t h = (int32_t)(idx / n_split), part = (int32_t)(idx % n_split);
        const int64_t kv0 = n_kv * part / n_split, kv1 = n_kv * (part + 1) / n_split;
        woolly_attn_args args = head_args(a, run, h, 0, 1, kv0, kv1);
        args.out = a->part + (size_t)part * q_dim + (size_t)h * group * a->head_dim;
        args.ml = a->ml + 2 * ((size_t)part * a->n_head + (size_t)h * group);
        if (kv0 < kv1)
            woolly_attn_call(a->kernel_decode, &args, ith, nth);
        else
            for (int32_t g = 0; g < group; g++)
                args.ml[2 * g] = -INFINITY, args.ml[2 * g + 1] = 0.0f;
    }
}

/* Merges each query head's n_split partial results into the token's output row. */
static void combine(const woolly_attn_layer *a)
{
    const size_t q_dim = (size_t)a->n_head * a->head_dim;
    float *row = a->out + (size_t)a->runs[0].row0 * q_dim;
    const float *outs[WOOLLY_ATTN_MAX_PARTS], *mls[WOOLLY_ATTN_MAX_PARTS];
    for (int32_t h = 0; h < a->n_head; h++) {
        for (int32_t i = 0; i < a->n_split; i++) {
            outs[i] = a->part + (size_t)i * q_dim + (size_t)h * a->head_dim;
            mls[i] = a->ml + 2 * ((size_t)i * a->n_head + (size_t)h);
        }
        woolly_attn_combine(a->n_split, outs, mls, a->head_dim, row + (size_t)h * a->head_dim);
    }
}

int woolly_attn_threads(const woolly_threadpool *pool, const woolly_attn_layer *a)
{
    /* Work ~ query heads x visible positions x head_dim, summed over the batch's tokens. */
    double work = 0.0;
    for (int32_t r = 0; r < a->n_runs; r++)
        work += (double)a->runs[r].n * (a->runs[r].pos0 + (a->runs[r].n + 1) / 2.0) * a->n_head * a->head_dim;
    return woolly_threads_for(pool, work, ATTN_MIN_WORK_PER_THREAD);
}

int32_t woolly_attn_kv_split(int32_t n_head_kv, int nth, int64_t n_kv, int32_t chosen, int32_t max_parts)
{
    int32_t a = n_head_kv, b = nth;
    while (b) {
        const int32_t r = a % b;
        a = b, b = r;
    }
    int32_t split = chosen > 0 ? chosen : nth / a;
    while (split > 1 && n_kv < (int64_t)split * ATTN_MIN_SPLIT_POSITIONS)
        split--;
    return split < max_parts ? split : max_parts;
}

void woolly_attn_run(woolly_threadpool *pool, const woolly_attn_layer *a, int nth)
{
    if (a->n_split > 1) {
        woolly_threadpool_run_n(pool, split_run, (void *)a, nth);
        combine(a);
    } else {
        woolly_threadpool_run_n(pool, batch_run, (void *)a, nth);
    }
}

static woolly_attn_observer g_attn_observer;

void woolly_attn_set_observer(woolly_attn_observer fn)
{
    g_attn_observer = fn;
}

void woolly_attn_call(const woolly_kernel *k, const woolly_attn_args *a, int ith, int nth)
{
    const woolly_attn_observer observe = g_attn_observer;
    if (observe)
        observe(k, a, ith, nth);
    k->attn(a);
}
