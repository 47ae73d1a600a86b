/* Tuning attention: the search of tune_attn.h, and the bench it measures with. */
#include "tune_attn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_run.h"
#include "kv_cache.h"
#include "timing.h"

/* As the matrices' search (tune_search.c). */
#define NOISE_MARGIN 0.03
#define VERIFY_ROUNDS 2

/* Decode is measured over a cache this long (or the model's context, if shorter); prefill with this
 * many causal queries from position 0 (ditto). */
enum { DECODE_POSITIONS = 4096, PREFILL_QUERIES = 512, DISTINCT_ROWS = 64 };
/* KV splits tried for decode (those the runtime would shorten at the measured cache are skipped), and
 * the multiples of the kernel's query tile tried as queries per call for prefill. */
static const int32_t SPLITS[] = {1, 2, 3, 4, 6, 8, 12, 16};
static const int32_t QUERY_TILES[] = {2, 4};

static const char *type_name(enum woolly_type t)
{
    const woolly_type_info *ti = woolly_type_get(t);
    return ti ? ti->name : "?";
}

/* ---- the bench: one layer's attention of the model's heads --------------------------------------- */

typedef struct attn_bench {
    const woolly_tune_model *m;
    woolly_threadpool *pool;
    woolly_kv_cache kv;
    int32_t n_layers, layer; /* layers of cache rotated over, and the next one a call reads */
    woolly_seq_run run;      /* the queries: run.n of them, at positions run.pos0 .. */
    float *q, *out, *part, *ml;
    int32_t decode_l2; /* the one-query path's L2 prefetch, as the run takes it (registry.h) */
    /* the candidate */
    const woolly_kernel *k;
    int32_t q_per_call, split;
} attn_bench;

static void bench_close(attn_bench *b)
{
    woolly_kv_cache_close(&b->kv);
    free(b->q), free(b->out), free(b->part), free(b->ml);
    memset(b, 0, sizeof *b);
}

/* Deterministic values in [-1, 1). */
static float next_value(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)(*s >> 40) / (float)(1 << 23) - 1.0f;
}

static int bench_open(attn_bench *b, const woolly_tune_model *m, enum woolly_type cache,
                      woolly_threadpool *pool, int32_t n_q, int32_t positions, double rotate_bytes,
                      woolly_error *err)
{
    memset(b, 0, sizeof *b);
    b->m = m, b->pool = pool;
    b->decode_l2 = woolly_kernel_attn_decode_l2();
    b->run = (woolly_seq_run){.row0 = 0, .n = n_q, .seq = 0, .pos0 = positions - n_q, .generated = n_q == 1};
    const size_t per_layer = woolly_kv_cache_bytes(cache, positions, 1, m->n_head_kv, m->head_dim);
    double layers = per_layer ? ceil(rotate_bytes / (double)per_layer) : 1;
    layers = layers < 1 ? 1 : layers > m->n_layer ? m->n_layer : layers;
    if (woolly_kv_cache_open(&b->kv, cache, positions, 1, (int64_t)layers, m->n_head_kv, m->head_dim, err))
        return -1;
    b->n_layers = (int32_t)layers;
    const size_t q_dim = (size_t)m->n_head * (size_t)m->head_dim, kv_dim = (size_t)m->n_head_kv * m->head_dim;
    b->q = malloc(sizeof(float) * q_dim * (size_t)n_q);
    b->out = malloc(sizeof(float) * q_dim * (size_t)n_q);
    b->part = malloc(sizeof(float) * q_dim * WOOLLY_ATTN_MAX_PARTS);
    b->ml = malloc(sizeof(float) * 2 * (size_t)m->n_head * WOOLLY_ATTN_MAX_PARTS);
    float *rows = malloc(sizeof(float) * kv_dim * DISTINCT_ROWS * 2);
    if (!b->q || !b->out || !b->part || !b->ml || !rows) {
        free(rows);
        bench_close(b);
        return woolly_fail(err, "out of memory for attention of %d queries", n_q);
    }
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < q_dim * (size_t)n_q; i++)
        b->q[i] = next_value(&s);
    for (size_t i = 0; i < kv_dim * DISTINCT_ROWS * 2; i++)
        rows[i] = next_value(&s);
    for (int32_t l = 0; l < b->n_layers; l++)
        for (int32_t p = 0; p < positions; p++) {
            const size_t r = (size_t)((p * 7 + l) % DISTINCT_ROWS);
            woolly_kv_cache_store(&b->kv, l, 0, p, rows + 2 * r * kv_dim, rows + (2 * r + 1) * kv_dim);
        }
    free(rows);
    return 0;
}

/* One layer's attention as the forward pass hands it to the runtime's work split (attn_run.h), with the
 * candidate for decode and prefill alike, over the next layer of the rotation. */
static woolly_attn_layer bench_layer(const attn_bench *b)
{
    const woolly_tune_model *m = b->m;
    return (woolly_attn_layer){
        .n_head = m->n_head,
        .n_head_kv = m->n_head_kv,
        .head_dim = m->head_dim,
        .scale = 1.0f / sqrtf((float)m->head_dim),
        .q = b->q,
        .out = b->out,
        .runs = &b->run,
        .n_runs = 1,
        .kv = &b->kv,
        .layer = b->layer,
        .kernel = b->k,
        .kernel_decode = b->k,
        .q_per_call = b->q_per_call,
        .decode_l2_blocks = b->decode_l2,
        .n_split = b->split,
        .part = b->part,
        .ml = b->ml,
    };
}

static void run_once(void *arg)
{
    attn_bench *b = arg;
    const woolly_attn_layer a = bench_layer(b);
    woolly_attn_run(b->pool, &a, woolly_attn_threads(b->pool, &a));
    b->layer = (b->layer + 1) % b->n_layers;
}

/* A split as the runtime applies it to this cache: fewer chunks while they would be short; with 0, the
 * split it picks without a profile. (A run caps it by its scratch, which holds a profile's split and at
 * least as many chunks as threads, so only WOOLLY_ATTN_MAX_PARTS can bind here.) */
static int32_t effective_split(const attn_bench *b, int32_t split)
{
    const woolly_attn_layer a = bench_layer(b);
    return woolly_attn_kv_split(b->m->n_head_kv, woolly_attn_threads(b->pool, &a), (int64_t)b->run.pos0 + 1,
                                split, WOOLLY_ATTN_MAX_PARTS);
}

/* ---- the search ---------------------------------------------------------------------------------- */

typedef struct attn_step {
    const woolly_kernel *k;
    int32_t q_per_call, split;
} attn_step;

static void step_text(const attn_step *s, enum woolly_attn_phase ph, char *buf, size_t n)
{
    if (ph == WOOLLY_ATTN_DECODE)
        snprintf(buf, n, "%s split=%d", s->k->name, s->split);
    else
        snprintf(buf, n, "%s queries=%d", s->k->name, s->q_per_call);
}

/* Seconds per call of step s (the median of the samples); *pruned as tune_measure. */
static void measure(attn_bench *b, const tune_attn_env *env, enum woolly_attn_phase ph, const attn_step *s,
                    double best_s, double *sec, bool *pruned)
{
    const tune_timing t = env->timing(env->ctx, true, best_s);
    b->k = s->k, b->q_per_call = s->q_per_call, b->split = s->split;
    *pruned = false;
    const double t0 = woolly_now_s();
    run_once(b); /* the first call: warm-up, and a bound on the time of the others */
    const double first = woolly_now_s() - t0;
    if ((t.prune_s > 0 && first > t.prune_s) || first >= t.cap_s) {
        *pruned = t.prune_s > 0 && first > t.prune_s;
        *sec = first;
    } else {
        *sec = woolly_time_fn(run_once, b, t.min_sample_s, t.samples, t.cap_s - first).median_s;
    }
    char step[160], what[256];
    step_text(s, ph, step, sizeof step);
    snprintf(what, sizeof what, "attention %s %s d%d: %s", woolly_attn_phase_name(ph), type_name(b->kv.type),
             b->m->head_dim, step);
    env->measured(env->ctx, what);
}

/* The kernels tried: those of the default's ISA level for this cache and head dimension that this CPU
 * runs (a lower level's tiles are never faster; the default is one of them), with F32 operands, and with
 * rounded ones (BF16, FP16 P V, int16) where the model's accuracy allows them (act, woolly_attn_act) even
 * where they are not the default (a CPU whose BF16 dot product does not pay, woolly_kernel_choose_attn). */
static int candidates(const woolly_kernel *def, enum woolly_type cache, int32_t head_dim, enum woolly_act act,
                      const woolly_kernel **out, int max)
{
    int nk, n = 0;
    const woolly_kernel *ks = woolly_kernel_list(&nk);
    for (int i = 0; i < nk && n < max; i++) {
        const woolly_kernel *k = &ks[i];
        if (k->op == WOOLLY_OP_ATTN && k->wtype == cache && (k->head_dim == head_dim || k->head_dim == 0) &&
            k->isa == def->isa && (k->act == WOOLLY_ACT_F32 || act != WOOLLY_ACT_F32) &&
            woolly_kernel_runs(k))
            out[n++] = k;
    }
    return n;
}

enum { MAX_KERNELS = 32 };

/* Whether two tiled kernels decode a group of `group` heads with the same code: the one-query path
 * (templates/attn/decode.c.j2) takes groups of 1, 2, 4 and 8 for every tile variant of an ISA, cache and
 * head dimension, with its own KV blocks, and differs only where P V is summed in halves (the FP16
 * tiles'). The untiled kernels (head dimension 0) have no such path. */
static bool same_one_query_path(const woolly_kernel *a, const woolly_kernel *b, int32_t group)
{
    const bool path = group == 1 || group == 2 || group == 4 || group == 8;
    return path && a->head_dim != 0 && b->head_dim != 0 && a->isa == b->isa && a->wtype == b->wtype &&
           a->head_dim == b->head_dim && (a->act == WOOLLY_ACT_F16) == (b->act == WOOLLY_ACT_F16);
}

/* The operand format the model's attention may use: woolly_attn_act over the default activation formats
 * of its matrices, as the runtime chooses them. */
static enum woolly_act attn_act(const woolly_tune_model *m, bool strict)
{
    unsigned acts = 0;
    for (int i = 0; i < m->n_shapes; i++) {
        enum woolly_act act;
        const woolly_layout *layout;
        if (!woolly_matmul_default_format(m->shapes[i].type, m->shapes[i].cols,
                                          strict ? WOOLLY_ACT_MASK_STRICT : WOOLLY_ACT_MASK_ALL, &act, &layout,
                                          NULL))
            acts |= 1u << act;
    }
    return woolly_attn_act(acts);
}

/* Why this model's attention is not tuned for this cache ("" if it is); its default kernel in *def. */
static const char *untunable(const woolly_tune_model *m, const woolly_tune_opts *o, const woolly_kernel **def)
{
    const enum woolly_type cache = o->kv_cache;
    *def = NULL;
    if (m->n_head < 1 || m->n_head_kv < 1 || m->head_dim < 1 || m->n_layer < 1 || m->n_ctx < 1)
        return "the model's attention dimensions are not known";
    if (m->n_head % m->n_head_kv || m->n_head / m->n_head_kv > WOOLLY_MAX_GROUP)
        return "the model's query heads are not shared evenly by its KV heads";
    if (cache == WOOLLY_TYPE_Q8_0 && m->head_dim % WOOLLY_QK8_0)
        return "a Q8_0 cache needs a head dimension that is a multiple of 32";
    if (!(*def = woolly_kernel_choose_attn(cache, m->head_dim, attn_act(m, o->strict))))
        return "no attention kernel serves this cache and head dimension";
    return "";
}

static void phase_shape(const woolly_tune_model *m, enum woolly_attn_phase ph, int32_t *n_q,
                        int32_t *positions)
{
    const int32_t ctx = m->n_ctx;
    if (ph == WOOLLY_ATTN_DECODE) {
        *n_q = 1;
        *positions = ctx < DECODE_POSITIONS ? ctx : DECODE_POSITIONS;
    } else {
        *n_q = *positions = ctx < PREFILL_QUERIES ? ctx : PREFILL_QUERIES;
    }
}

int tune_attn_estimate(const woolly_tune_model *m, const woolly_tune_opts *o)
{
    const woolly_kernel *def, *ks[MAX_KERNELS];
    if (*untunable(m, o, &def))
        return 0;
    const int nk = candidates(def, o->kv_cache, m->head_dim, attn_act(m, o->strict), ks, MAX_KERNELS);
    const int decode = nk + (int)(sizeof SPLITS / sizeof SPLITS[0]) + 2 * VERIFY_ROUNDS;
    const int prefill = nk + (int)(sizeof QUERY_TILES / sizeof QUERY_TILES[0]) + 2 * VERIFY_ROUNDS;
    return decode + prefill;
}

static bool same(const attn_step *a, const attn_step *b)
{
    return a->k == b->k && a->q_per_call == b->q_per_call && a->split == b->split;
}

/* Tunes one phase by `deadline`: past it, no more candidates; a choice it leaves unverified is dropped
 * for the default. */
static int tune_phase(const woolly_tune_model *m, const woolly_tune_opts *o, const tune_attn_env *env,
                      const woolly_kernel *def_k, enum woolly_attn_phase ph, double deadline,
                      woolly_tune_attn_case *out, woolly_error *err)
{
    int32_t n_q, positions;
    phase_shape(m, ph, &n_q, &positions);
    attn_bench b;
    if (bench_open(&b, m, o->kv_cache, env->pool, n_q, positions, env->rotate_bytes, err))
        return -1;
    const bool decode = ph == WOOLLY_ATTN_DECODE;

    /* The default: what a run without a profile does. */
    const attn_step def = {def_k, decode ? 1 : def_k->tile_m, decode ? effective_split(&b, 0) : 1};
    double def_s, sec;
    bool pruned;
    b.k = def.k, b.q_per_call = def.q_per_call, b.split = def.split;
    run_once(&b); /* untimed: the buffers' first touch */
    measure(&b, env, ph, &def, 0, &def_s, &pruned);

    /* Stage 1: every kernel (tile) with the default's blocking; for decode, one per one-query path. */
    attn_step best = def;
    double best_s = def_s;
    const woolly_kernel *ks[MAX_KERNELS];
    const int nk = candidates(def_k, o->kv_cache, m->head_dim, attn_act(m, o->strict), ks, MAX_KERNELS);
    const int32_t group = m->n_head / m->n_head_kv;
    for (int i = 0; i < nk && woolly_now_s() < deadline; i++) {
        bool measured = ks[i] == def_k || (decode && same_one_query_path(ks[i], def_k, group));
        for (int j = 0; j < i && decode && !measured; j++)
            measured = same_one_query_path(ks[i], ks[j], group);
        if (measured)
            continue;
        const attn_step s = {ks[i], decode ? 1 : ks[i]->tile_m, def.split};
        measure(&b, env, ph, &s, best_s, &sec, &pruned);
        if (!pruned && sec < best_s * (1 - NOISE_MARGIN))
            best = s, best_s = sec;
    }

    /* Stage 2: decode's split of the cache, prefill's queries per call, for the best kernel. */
    const int n_vals =
        decode ? (int)(sizeof SPLITS / sizeof SPLITS[0]) : (int)(sizeof QUERY_TILES / sizeof QUERY_TILES[0]);
    const attn_step base = best;
    for (int i = 0; i < n_vals && woolly_now_s() < deadline; i++) {
        attn_step s = base;
        if (decode) {
            s.split = SPLITS[i];
            if (effective_split(&b, s.split) != s.split || s.split == base.split)
                continue;
        } else {
            s.q_per_call = QUERY_TILES[i] * base.k->tile_m;
            if (s.q_per_call > n_q || s.q_per_call > WOOLLY_PROFILE_MAX_QUERIES_PER_CALL)
                continue;
        }
        measure(&b, env, ph, &s, best_s, &sec, &pruned);
        if (!pruned && sec < best_s * (1 - NOISE_MARGIN))
            best = s, best_s = sec;
    }

    /* Stage 3: a choice other than the default, measured again beside it; the lower of each. */
    *out = (woolly_tune_attn_case){0};
    if (!same(&best, &def) && woolly_now_s() >= deadline) { /* no time left to check it */
        best = def, best_s = def_s;
        out->unchecked = true;
    }
    if (!same(&best, &def)) {
        double v[2] = {INFINITY, INFINITY};
        for (int round = 0; round < VERIFY_ROUNDS; round++)
            for (int j = 0; j < 2; j++) {
                measure(&b, env, ph, j ? &best : &def, 0, &sec, &pruned);
                v[j] = sec < v[j] ? sec : v[j];
            }
        def_s = v[0], best_s = v[1];
        out->verified = true;
        if (best_s >= def_s) {
            best = def, best_s = def_s;
            out->reverted = true;
        }
    }
    bench_close(&b);

    const woolly_profile_attn row = {.cache = o->kv_cache,
                                     .head_dim = m->head_dim,
                                     .phase = ph,
                                     .threads = o->threads,
                                     .kernel = best.k,
                                     .queries_per_call = best.q_per_call,
                                     .kv_split = best.split,
                                     .queries = n_q,
                                     .positions = positions,
                                     .us = best_s * 1e6,
                                     .default_kernel = def.k,
                                     .default_us = def_s * 1e6};
    out->chosen = row;
    out->def = row;
    out->def.kernel = def.k, out->def.queries_per_call = def.q_per_call, out->def.kv_split = def.split;
    out->def.us = def_s * 1e6;
    return 0;
}

int tune_attn_run(const woolly_tune_model *m, const woolly_tune_opts *o, const tune_attn_env *env,
                  woolly_tune_result *r, woolly_error *err)
{
    r->n_attn = 0;
    const woolly_kernel *def;
    const char *why = untunable(m, o, &def);
    if (*why) {
        snprintf(r->attn_skipped, sizeof r->attn_skipped, "%s", why);
        return 0;
    }
    const double t0 = woolly_now_s();
    for (int ph = 0; ph < WOOLLY_ATTN_PHASES; ph++) {
        woolly_tune_attn_case *c = &r->attn[ph];
        /* decode, with its short calls, before half of the share; prefill in the rest */
        const double deadline = ph == WOOLLY_ATTN_DECODE ? t0 + (env->deadline - t0) / 2 : env->deadline;
        if (tune_phase(m, o, env, def, (enum woolly_attn_phase)ph, deadline, c, err) ||
            woolly_profile_add_attn(r->profile, &c->chosen, err))
            return -1;
        r->n_attn++;
    }
    return 0;
}
