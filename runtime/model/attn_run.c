/* One layer's attention split across the threads (attn_run.h). */
#include "attn_run.h"

#include <math.h>
#include <stdatomic.h>

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
        .window = a->window,
        .ring = woolly_kv_cache_ring(a->kv, a->layer),
        .head_dim = hd,
        .n_group = group,
        .scale = a->scale,
        .out = a->out + first_q,
        .out_stride = (size_t)hd,
        .out_row_stride = q_dim,
        .ml = NULL,
        .one_query_tiles = !r->generated,
        .decode_l2_blocks = a->decode_l2_blocks,
    };
}

/* An item of a batch: KV head h of a run, its queries [t0, t0 + nq). Items go run-major, then by head,
 * then by block of q_per_call queries; an item costs the positions its queries see, from the first
 * query's first to the last query (so the early blocks of a causal prompt are cheap, and with a window
 * every block costs about the window). */
typedef struct attn_item {
    const woolly_seq_run *run;
    int32_t h, t0, nq;
} attn_item;

static int64_t run_items(const woolly_attn_layer *a, const woolly_seq_run *r)
{
    return (int64_t)a->n_head_kv * ((r->n + a->q_per_call - 1) / a->q_per_call);
}

static attn_item item_at(const woolly_attn_layer *a, int64_t i)
{
    const woolly_seq_run *r = a->runs;
    for (; i >= run_items(a, r); r++)
        i -= run_items(a, r);
    const int32_t blocks = (r->n + a->q_per_call - 1) / a->q_per_call,
                  t0 = (int32_t)(i % blocks) * a->q_per_call;
    return (attn_item){r, (int32_t)(i / blocks), t0, r->n - t0 < a->q_per_call ? r->n - t0 : a->q_per_call};
}

/* The first cache position query block [t0, ..) of a run sees. */
static int64_t item_kv0(const woolly_attn_layer *a, const attn_item *it)
{
    const int64_t pos = (int64_t)it->run->pos0 + it->t0;
    return pos + 1 - woolly_attn_visible(pos, a->window);
}

static double item_cost(const woolly_attn_layer *a, const attn_item *it)
{
    return (double)((int64_t)it->run->pos0 + it->t0 + it->nq - item_kv0(a, it));
}

static void run_item(const woolly_attn_layer *a, const attn_item *it, int ith, int nth)
{
    const woolly_attn_args args = head_args(a, it->run, it->h, it->t0, it->nq, item_kv0(a, it),
                                            (int64_t)it->run->pos0 + it->t0 + it->nq);
    woolly_attn_call(it->run->generated ? a->kernel_decode : a->kernel, &args, ith, nth);
}

/* A batch across the threads: each first runs a contiguous stretch of the items before `shared`, of
 * nearly equal cost, then the threads take the rest one item at a time, each the next one free, so that
 * a thread slowed by something outside the job does not keep the others waiting (as the matmuls do).
 * The rest goes from the last item backwards: within a KV head, the later blocks of a causal prompt
 * see more positions, so the larger items go before the smaller ones. */
typedef struct attn_batch_job {
    const woolly_attn_layer *a;
    int64_t n_items, shared; /* items [shared, n_items) are taken one by one */
    double static_cost;      /* the cost of items [0, shared) */
    atomic_llong next;       /* shared items taken so far */
} attn_batch_job;

enum { SHARED_PART = 4 /* the last quarter of the cost */ };

static void batch_prepare(attn_batch_job *j, const woolly_attn_layer *a)
{
    double total = 0.0;
    j->a = a;
    j->n_items = 0;
    for (int32_t r = 0; r < a->n_runs; r++)
        j->n_items += run_items(a, &a->runs[r]);
    for (int64_t i = 0; i < j->n_items; i++) {
        const attn_item it = item_at(a, i);
        total += item_cost(a, &it);
    }
    j->shared = j->n_items;
    j->static_cost = 0.0;
    for (int64_t i = 0; i < j->n_items; i++) {
        const attn_item it = item_at(a, i);
        if (j->static_cost + item_cost(a, &it) / 2 >= total - total / SHARED_PART) {
            j->shared = i;
            break;
        }
        j->static_cost += item_cost(a, &it);
    }
    atomic_init(&j->next, 0);
}

static void batch_run(void *arg, int ith, int nth)
{
    attn_batch_job *j = arg;
    const woolly_attn_layer *a = j->a;
    const double lo = j->static_cost * ith / nth, hi = j->static_cost * (ith + 1) / nth;
    double at = 0.0;
    for (int64_t i = 0; i < j->shared && at < hi; i++) {
        const attn_item it = item_at(a, i);
        const double cost = item_cost(a, &it), mid = at + cost / 2;
        at += cost;
        if (mid >= lo && mid < hi)
            run_item(a, &it, ith, nth);
    }
    for (long long k; (k = atomic_fetch_add(&j->next, 1)) < j->n_items - j->shared;) {
        const attn_item it = item_at(a, j->n_items - 1 - k);
        run_item(a, &it, ith, nth);
    }
}

/* One generated token: the items (KV head, chunk of its visible cache positions), n_head_kv * n_split of
 * them, split evenly across the threads; each chunk leaves a partial result in part / ml (an empty chunk,
 * when there are more chunks than positions, one that says so: m = -inf, l = 0). */
static void split_run(void *arg, int ith, int nth)
{
    const woolly_attn_layer *a = arg;
    const int32_t group = a->n_head / a->n_head_kv, q_dim = a->n_head * a->head_dim, n_split = a->n_split;
    const woolly_seq_run *run = &a->runs[0];
    const int64_t n_kv = woolly_attn_visible(run->pos0, a->window), first = (int64_t)run->pos0 + 1 - n_kv;
    long long lo, hi;
    woolly_split_range((long long)a->n_head_kv * n_split, 1, ith, nth, &lo, &hi);
    for (long long idx = lo; idx < hi; idx++) {
        const int32_t h = (int32_t)(idx / n_split), part = (int32_t)(idx % n_split);
        const int64_t kv0 = first + n_kv * part / n_split, kv1 = first + n_kv * (part + 1) / n_split;
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
    for (int32_t r = 0; r < a->n_runs; r++) {
        double seen = a->runs[r].pos0 + (a->runs[r].n + 1) / 2.0;
        if (a->window > 0 && seen > a->window)
            seen = a->window;
        work += (double)a->runs[r].n * seen * a->n_head * a->head_dim;
    }
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
        attn_batch_job j;
        batch_prepare(&j, a);
        woolly_threadpool_run_n(pool, batch_run, &j, nth);
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
