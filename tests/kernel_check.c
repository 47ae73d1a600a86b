#include "kernel_check.h"

#include "harness.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matmul.h"
#include "quant.h"
#include "registry.h"
#include "testutil.h"

/* Paddings that are not multiples of anything, so that a kernel assuming packed rows is caught. */
enum { X_PAD_FLOATS = 5, Y_PAD_FLOATS = 7, KV_PAD_ELEMS = 3, Q_PAD_FLOATS = 11 };
static const float SENTINEL = -12345.0f;

bool kc_cpu_runs(const char *name, enum woolly_isa isa, unsigned features)
{
    const woolly_kernel probe = {.name = name, .isa = isa, .features = features};
    if (woolly_kernel_runs(&probe))
        return true;
    fprintf(stderr, "%s: not run, this CPU lacks what it needs (level %s%s)\n", name, woolly_isa_name(isa),
            features ? " and CPU features beyond it" : "");
    return false;
}

/* The scalar reference packer of an activation format (the oracle's view of the activations). */
static woolly_pack_fn reference_packer(enum woolly_act act)
{
    const char *name = act == WOOLLY_ACT_F16    ? "pack_f16_scalar"
                       : act == WOOLLY_ACT_BF16 ? "pack_bf16_scalar"
                       : act == WOOLLY_ACT_Q8K  ? "pack_q8k_scalar"
                                                : "pack_q8_scalar";
    const woolly_kernel *k = woolly_kernel_by_name(name);
    cr_assert(k && k->pack, "no %s in the registry", name);
    return k->pack;
}

/* The packed row's values as the kernel sees them, in double. */
static void unpack_act(enum woolly_act act, const void *row, int64_t k, double *out)
{
    if (act == WOOLLY_ACT_F16 || act == WOOLLY_ACT_BF16) {
        for (int64_t i = 0; i < k; i++) {
            const uint16_t h = ((const uint16_t *)row)[i];
            out[i] = act == WOOLLY_ACT_F16 ? woolly_f16_to_f32(h) : woolly_bf16_to_f32(h);
        }
        return;
    }
    if (act == WOOLLY_ACT_Q8K) {
        const woolly_block_q8x256 *b = row;
        for (int64_t i = 0; i < k; i++)
            out[i] = (double)b[i / 256].d * b[i / 256].q[i % 256];
        return;
    }
    const woolly_block_q8x32 *b = row;
    for (int64_t i = 0; i < k; i++)
        out[i] = (double)b[i / 32].d * b[i / 32].q[i % 32];
}

/* The quantized weights of the matmul cases, cached: a kernel's test runs some 50 cases on three values
 * of k, and quantizing the rows (the K-quants' scale search) was a quarter of the Q4_K kernels' test time
 * in the sanitizer build. Row r of a given k is the same in every case (its own seed), so a case takes
 * the first rows of the cache, extending it where it needs more; one entry, as cases come in order of k. */
static struct {
    enum woolly_type wtype;
    int64_t k, rows;
    uint8_t *w;
    float *wf;
} weight_cache;

static void weight_cache_get(enum woolly_type wtype, int64_t k, int64_t rows, uint8_t *w, float *wf)
{
    const size_t row_bytes = woolly_row_bytes(wtype, k);
    if (weight_cache.wtype != wtype || weight_cache.k != k) {
        free(weight_cache.w), free(weight_cache.wf);
        weight_cache.w = NULL, weight_cache.wf = NULL;
        weight_cache.wtype = wtype, weight_cache.k = k, weight_cache.rows = 0;
    }
    if (weight_cache.rows < rows) {
        weight_cache.w = realloc(weight_cache.w, row_bytes * (size_t)rows);
        weight_cache.wf = realloc(weight_cache.wf, sizeof(float) * (size_t)(k * rows));
        float *src = malloc(sizeof(float) * (size_t)k);
        cr_assert(weight_cache.w && weight_cache.wf && src);
        for (int64_t r = weight_cache.rows; r < rows; r++) {
            tu_rng rng = {(uint64_t)(k * 1000003 + r * 7919 + 1)};
            for (int64_t i = 0; i < k; i++)
                src[i] = 0.02f * tu_rand_normal(&rng);
            /* a first super-block of zeros (d = 0 in every format) and one of a single negative value (Q4_K,
             * Q5_K: d = 0 and only the min term left) */
            for (int64_t i = 0; i < k && i < 256 && (r == 1 || r == 2); i++)
                src[i] = r == 1 ? 0.0f : -0.015f;
            uint8_t *wr = weight_cache.w + (size_t)r * row_bytes;
            cr_assert_eq(woolly_quantize_row(wtype, src, wr, k), row_bytes);
            cr_assert_eq(woolly_dequantize_row(wtype, wr, weight_cache.wf + r * k, k), 0);
        }
        free(src);
        weight_cache.rows = rows;
    }
    memcpy(w, weight_cache.w, row_bytes * (size_t)rows);
    memcpy(wf, weight_cache.wf, sizeof(float) * (size_t)(k * rows));
}

/* A matmul case's inputs: rows of random weights quantized (and, for a layout, repacked), m tokens of
 * activations (packed to the kernel's format), their float64 views, and y (stride y_stride). */
typedef struct mm_inputs {
    uint8_t *w, *packed, *repacked;
    float *wf, *x, *y;
    double *xd;
    const void *wk, *xk;
    size_t w_row_bytes, x_row_bytes, x_stride, y_stride;
} mm_inputs;

static void mm_inputs_build(const kc_matmul_kernel *kern, int64_t k, int64_t m, int64_t rows, uint64_t seed,
                            mm_inputs *in)
{
    const char *name = kern->name;
    const size_t row_bytes = woolly_row_bytes(kern->wtype, k);
    cr_assert(row_bytes > 0, "%s: k=%lld is not a whole number of blocks", name, (long long)k);
    tu_rng rng = {seed};
    memset(in, 0, sizeof *in);
    in->x_stride = (size_t)k + X_PAD_FLOATS;
    in->y_stride = (size_t)rows + Y_PAD_FLOATS;
    in->w = malloc(row_bytes * (size_t)rows);
    in->wf = malloc(sizeof(float) * (size_t)(k * rows));
    in->x = malloc(sizeof(float) * in->x_stride * (size_t)m);
    in->y = malloc(sizeof(float) * in->y_stride * (size_t)m);
    in->xd = malloc(sizeof(double) * (size_t)k * (size_t)m);
    cr_assert(in->w && in->wf && in->x && in->y && in->xd);
    weight_cache_get(kern->wtype, k, rows, in->w, in->wf);
    for (size_t i = 0; i < in->x_stride * (size_t)m; i++)
        in->x[i] = tu_rand_normal(&rng);

    /* The activations in the kernel's format, rows padded to a prime number of bytes past their end. */
    in->xk = in->x;
    in->x_row_bytes = in->x_stride * sizeof(float);
    if (kern->act == WOOLLY_ACT_F32) {
        for (int64_t t = 0; t < m; t++)
            for (int64_t i = 0; i < k; i++)
                in->xd[t * k + i] = in->x[(size_t)t * in->x_stride + (size_t)i];
    } else {
        const woolly_pack_fn pack = reference_packer(kern->act);
        const bool halves = kern->act == WOOLLY_ACT_F16 || kern->act == WOOLLY_ACT_BF16;
        const size_t pb = woolly_act_row_bytes(kern->act, k);
        cr_assert(pb > 0, "%s: k=%lld is not a whole number of activation blocks", name, (long long)k);
        /* padded by a prime number of bytes, or (the int8 formats) by one block */
        in->x_row_bytes = pb + (halves ? 2 * X_PAD_FLOATS : woolly_act_row_bytes(kern->act, kern->act == WOOLLY_ACT_Q8K ? 256 : 32));
        in->packed = malloc(in->x_row_bytes * (size_t)m);
        cr_assert(in->packed);
        for (int64_t t = 0; t < m; t++) {
            pack(in->x + (size_t)t * in->x_stride, k, in->packed + (size_t)t * in->x_row_bytes);
            unpack_act(kern->act, in->packed + (size_t)t * in->x_row_bytes, k, in->xd + t * k);
        }
        in->xk = in->packed;
    }

    /* The weights in the kernel's layout. */
    in->wk = in->w;
    in->w_row_bytes = row_bytes;
    if (kern->repack) {
        const int64_t g = kern->layout_rows, groups = (rows + g - 1) / g;
        in->w_row_bytes =
            (size_t)(k / woolly_type_get(kern->wtype)->block_elems) * kern->layout_block_bytes / (size_t)g;
        in->repacked = malloc(in->w_row_bytes * (size_t)(groups * g));
        cr_assert(in->repacked);
        kern->repack(&(woolly_repack_args){.src = in->w,
                                           .src_row_bytes = row_bytes,
                                           .dst = in->repacked,
                                           .dst_row_bytes = in->w_row_bytes,
                                           .k = k,
                                           .r0 = 0,
                                           .r1 = rows});
        in->wk = in->repacked;
    }
}

static void mm_inputs_free(mm_inputs *in)
{
    free(in->w), free(in->wf), free(in->x), free(in->y), free(in->xd), free(in->packed), free(in->repacked);
}

static woolly_matmul_args mm_args(const mm_inputs *in, int64_t k, int64_t m, int64_t r0, int64_t r1)
{
    return (woolly_matmul_args){.w = in->wk,
                                .w_row_bytes = in->w_row_bytes,
                                .x = in->xk,
                                .x_row_bytes = in->x_row_bytes,
                                .y = in->y,
                                .y_stride = in->y_stride,
                                .k = k,
                                .m = m,
                                .r0 = r0,
                                .r1 = r1};
}

void kc_check_matmul(const kc_matmul_kernel *kern, const kc_matmul_case *c, double max_nmse)
{
    const char *name = kern->name;
    const int64_t rows = c->r1 + 2, k = c->k, m = c->m;
    mm_inputs in;
    mm_inputs_build(kern, k, m, rows, (uint64_t)(k * 1000003 + m * 101 + c->r0 * 7 + c->r1), &in);
    const size_t y_stride = in.y_stride;
    float *y = in.y;
    for (size_t i = 0; i < y_stride * (size_t)m; i++)
        y[i] = c->accumulate ? (float)(i % 5) - 2.0f : SENTINEL;
    woolly_matmul_args a = mm_args(&in, k, m, c->r0, c->r1);
    a.accumulate = c->accumulate;
    a.prefetch = c->prefetch;
    kern->fn(&a);

    double num = 0, den = 0;
    for (int64_t t = 0; t < m; t++)
        for (size_t r = 0; r < y_stride; r++) {
            const size_t at = (size_t)t * y_stride + r;
            const float before = c->accumulate ? (float)(at % 5) - 2.0f : SENTINEL;
            const float got = y[at];
            if ((int64_t)r < c->r0 || (int64_t)r >= c->r1) {
                cr_assert_eq(got, before, "%s: wrote y[%lld][%zu] outside rows [%lld, %lld)", name,
                             (long long)t, r, (long long)c->r0, (long long)c->r1);
                continue;
            }
            double ref = 0;
            for (int64_t i = 0; i < k; i++)
                ref += (double)in.wf[(int64_t)r * k + i] * in.xd[t * k + i];
            const double v = c->accumulate ? (double)got - before : got;
            num += (v - ref) * (v - ref);
            den += ref * ref;
        }
    const double nmse = num / (den > 0 ? den : 1);
    cr_assert(nmse <= max_nmse, "%s: k=%lld m=%lld rows [%lld, %lld)%s: NMSE %.3g > %.3g", name, (long long)k,
              (long long)m, (long long)c->r0, (long long)c->r1, c->accumulate ? " accumulating" : "", nmse,
              max_nmse);
    mm_inputs_free(&in);
}

void kc_check_same_bits(const kc_matmul_kernel *kerns, int n, int64_t k, int64_t m, int64_t rows)
{
    mm_inputs in;
    mm_inputs_build(&kerns[0], k, m, rows, (uint64_t)(k * 7919 + m * 31 + rows), &in);
    const size_t len = in.y_stride * (size_t)m;
    float *first = malloc(sizeof(float) * len);
    cr_assert(first != NULL);
    for (int i = 0; i < n; i++) {
        cr_assert(kerns[i].wtype == kerns[0].wtype && kerns[i].act == kerns[0].act &&
                      kerns[i].repack == kerns[0].repack,
                  "%s and %s read different inputs", kerns[i].name, kerns[0].name);
        for (size_t j = 0; j < len; j++)
            in.y[j] = SENTINEL;
        woolly_matmul_args a = mm_args(&in, k, m, 0, rows);
        kerns[i].fn(&a);
        if (!i) {
            memcpy(first, in.y, sizeof(float) * len);
            continue;
        }
        for (int64_t t = 0; t < m; t++)
            for (int64_t r = 0; r < rows; r++) {
                const size_t at = (size_t)t * in.y_stride + (size_t)r;
                cr_assert(in.y[at] == first[at], "%s: token %lld of %lld, row %lld: %.9g, %s gives %.9g",
                          kerns[i].name, (long long)t, (long long)m, (long long)r, in.y[at], kerns[0].name,
                          first[at]);
            }
    }
    free(first);
    mm_inputs_free(&in);
}

typedef struct threads_job {
    const kc_matmul_kernel *kern;
    woolly_matmul_args a;
} threads_job;

static void *threads_run(void *p)
{
    threads_job *j = p;
    j->kern->fn(&j->a);
    return NULL;
}

void kc_check_threads(const kc_matmul_kernel *kern, int64_t k, int64_t m, int threads, int rounds)
{
    enum { MAX_THREADS = 512 };
    cr_assert(threads >= 1 && threads <= MAX_THREADS);
    const int64_t g = kern->layout_rows > 1 ? kern->layout_rows : 1, rows = g * threads;
    mm_inputs in;
    mm_inputs_build(kern, k, m, rows, (uint64_t)(k * 31 + m + threads), &in);
    const size_t len = in.y_stride * (size_t)m;
    float *first = malloc(sizeof(float) * len);
    cr_assert(first != NULL);
    woolly_matmul_args whole = mm_args(&in, k, m, 0, rows);
    kern->fn(&whole);
    memcpy(first, in.y, sizeof(float) * len);
    for (int round = 0; round < rounds; round++) {
        for (size_t j = 0; j < len; j++)
            in.y[j] = SENTINEL;
        pthread_t *tid = malloc(sizeof *tid * (size_t)threads);
        threads_job *jobs = malloc(sizeof *jobs * (size_t)threads);
        cr_assert(tid && jobs);
        for (int t = 0; t < threads; t++) {
            jobs[t] = (threads_job){kern, mm_args(&in, k, m, g * t, g * (t + 1))};
            cr_assert_eq(pthread_create(&tid[t], NULL, threads_run, &jobs[t]), 0);
        }
        for (int t = 0; t < threads; t++)
            cr_assert_eq(pthread_join(tid[t], NULL), 0);
        free(tid), free(jobs);
        for (size_t j = 0; j < len; j++)
            cr_assert(in.y[j] == first[j] || (j % in.y_stride >= (size_t)rows),
                      "%s: round %d of %d threads, output %zu: %.9g against %.9g on one thread", kern->name, round,
                      threads, j, in.y[j], first[j]);
    }
    free(first);
    mm_inputs_free(&in);
}

void kc_check_layout(const kc_layout *l, int64_t k, int64_t rows)
{
    const size_t row_bytes = woolly_row_bytes(l->wtype, k);
    const int64_t g = l->rows, groups = (rows + g - 1) / g;
    const size_t lay_row_bytes =
        (size_t)(k / woolly_type_get(l->wtype)->block_elems) * l->block_bytes / (size_t)g;
    tu_rng rng = {(uint64_t)(k * 31 + rows)};
    uint8_t *w = malloc(row_bytes * (size_t)rows), *back = malloc(row_bytes);
    uint8_t *lay = malloc(lay_row_bytes * (size_t)(groups * g)), *zero = calloc(1, row_bytes);
    float *src = malloc(sizeof(float) * (size_t)k), *deq = malloc(sizeof(float) * (size_t)k);
    cr_assert(w && back && lay && zero && src && deq);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < k; i++)
            src[i] = 0.02f * tu_rand_normal(&rng);
        cr_assert_eq(woolly_quantize_row(l->wtype, src, w + (size_t)r * row_bytes, k), row_bytes);
    }
    memset(lay, 0xA5, lay_row_bytes * (size_t)(groups * g));
    /* In two calls, split at a group boundary, as the multi-threaded repack at load does. */
    const int64_t mid = groups > 1 ? g : rows;
    l->repack(&(woolly_repack_args){w, row_bytes, lay, lay_row_bytes, k, 0, mid});
    if (mid < rows)
        l->repack(&(woolly_repack_args){w, row_bytes, lay, lay_row_bytes, k, mid, rows});
    for (int64_t r = 0; r < groups * g; r++) {
        l->unpack(lay, lay_row_bytes, k, r, back);
        if (r < rows) {
            cr_assert(!memcmp(back, w + (size_t)r * row_bytes, row_bytes),
                      "%s: k=%lld row %lld of %lld changed by the round trip", l->name, (long long)k,
                      (long long)r, (long long)rows);
        } else {
            cr_assert_eq(woolly_dequantize_row(l->wtype, back, deq, k), 0);
            for (int64_t i = 0; i < k; i++)
                cr_assert_eq(deq[i], 0.0f, "%s: padding row %lld is not zero at %lld", l->name, (long long)r,
                             (long long)i);
        }
    }
    free(w), free(back), free(lay), free(zero), free(src), free(deq);
}

/* What a row of woolly_block_q8x256 must hold (the reference packer's own check, as the vectorized
 * packers only match its bytes): per 256 values d = max|x| / 127, every q within half a step of x / d
 * (so the largest is +-127), and each 32 values' integer sum. */
static void check_q8k_row(const float *x, int64_t k, const woolly_block_q8x256 *b)
{
    for (int64_t j = 0; j < k / 256; j++, b++) {
        float amax = 0.0f;
        for (int i = 0; i < 256; i++)
            amax = fmaxf(amax, fabsf(x[256 * j + i]));
        cr_assert_eq(b->d, amax / 127.0f, "q8k block %lld: d %g for max %g", (long long)j, b->d, amax);
        int sum[8] = {0};
        for (int i = 0; i < 256; i++) {
            const double want = b->d > 0.0f ? x[256 * j + i] / (double)b->d : 0.0;
            cr_assert_leq(fabs(want - b->q[i]), 0.5 + 1e-4, "q8k block %lld value %d: q %d for %g", (long long)j, i,
                          b->q[i], want);
            sum[i / 32] += b->q[i];
        }
        for (int s = 0; s < 8; s++)
            cr_assert_eq(b->sum[s], sum[s], "q8k block %lld: sum %d is %d, the quants add to %d", (long long)j, s,
                         b->sum[s], sum[s]);
    }
}

void kc_check_pack(woolly_pack_fn fn, const char *name, enum woolly_act act, int64_t k)
{
    const woolly_pack_fn ref = reference_packer(act);
    const size_t bytes = woolly_act_row_bytes(act, k);
    tu_rng rng = {(uint64_t)k * 7 + (uint64_t)act};
    float *x = malloc(sizeof(float) * (size_t)k);
    uint8_t *got = malloc(bytes + 1), *want = malloc(bytes + 1);
    cr_assert(x && got && want);
    for (int trial = 0; trial < 3; trial++) {
        for (int64_t i = 0; i < k; i++) {
            x[i] = (trial == 0 ? 1.0f : trial == 1 ? 30.0f : 1e-3f) * tu_rand_normal(&rng);
            if (i % 32 == 5) /* exact halves: the rounding rule shows */
                x[i] = (float)((i / 32) % 7) + 0.5f;
            if (i >= 32 && i < 64) /* an all-zero block */
                x[i] = 0.0f;
        }
        /* Half-precision formats: infinities, NaN, f32 subnormals, overflow, and ties of both formats. */
        static const float SPECIAL[] = {INFINITY, -INFINITY, NAN, 1e-40f, 3e38f, 1.0f + 0x1p-8f, 1.0f + 0x3p-8f,
                                        1.0f + 0x1p-11f, -(1.0f + 0x3p-11f)};
        if (act != WOOLLY_ACT_Q8 && act != WOOLLY_ACT_Q8K)
            for (size_t i = 0; i < sizeof SPECIAL / sizeof SPECIAL[0] && 70 + (int64_t)i < k; i++)
                x[70 + i] = SPECIAL[i];
        memset(got, 0x5A, bytes + 1);
        memset(want, 0x5A, bytes + 1);
        fn(x, k, got);
        ref(x, k, want);
        cr_assert_eq(got[bytes], 0x5A, "%s: wrote past the packed row (k=%lld)", name, (long long)k);
        if (act == WOOLLY_ACT_Q8K)
            check_q8k_row(x, k, (const woolly_block_q8x256 *)want);
        for (size_t i = 0; i < bytes; i++)
            cr_assert_eq(got[i], want[i], "%s: k=%lld trial %d: byte %zu is %u, the reference gives %u", name,
                         (long long)k, trial, i, got[i], want[i]);
    }
    free(x), free(got), free(want);
}

/* Fills position j of a cache (row_bytes apart) with n random values in the cache type; back gets the
 * values as the kernel will read them. */
static void fill_cache_row(enum woolly_type t, uint8_t *row, int64_t n, tu_rng *rng, float *back)
{
    /* uniform of unit variance: the caches of the long cases are thousands of rows, and the normal
     * variates' logarithms and cosines were a third of a scalar head-dimension-256 tile test's time */
    float x[WOOLLY_MAX_HEAD_DIM];
    for (int64_t i = 0; i < n; i++)
        x[i] = 3.4641016f * (tu_rand_uniform(rng) - 0.5f);
    cr_assert_eq(woolly_quantize_row(t, x, row, n), woolly_row_bytes(t, n));
    cr_assert_eq(woolly_dequantize_row(t, row, back, n), 0);
}

/* The float64 attention of query t, head h over the positions it sees: out[head_dim]. */
static void attn_reference(const kc_attn_case *c, const float *q, size_t q_stride, const float *kf,
                           const float *vf, float scale, int64_t t, int64_t h, double *p, double *out)
{
    const int64_t hd = c->head_dim, g = c->n_group;
    const float *qh = q + (size_t)(t * g + h) * q_stride;
    const int64_t end = c->pos0 + t + 1 < c->kv1 ? c->pos0 + t + 1 : c->kv1;
    const int64_t start = c->window > 0 && end - c->window > c->kv0 ? end - c->window : c->kv0;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = start; j < end; j++) {
        double s = 0;
        for (int64_t i = 0; i < hd; i++)
            s += (double)qh[i] * kf[j * hd + i];
        p[j] = s * scale;
        mx = p[j] > mx ? p[j] : mx;
    }
    for (int64_t j = start; j < end; j++)
        sum += (p[j] = exp(p[j] - mx));
    /* position by position along V's rows: V read in order, no division in the inner loop (these tests
     * run under qemu and the sanitizers too) */
    for (int64_t i = 0; i < hd; i++)
        out[i] = 0;
    for (int64_t j = start; j < end; j++) {
        const double w = p[j] / sum;
        for (int64_t i = 0; i < hd; i++)
            out[i] += w * vf[j * hd + i];
    }
}

/* NMSE of out (rows q_stride apart, one per (query, head)) against the reference; asserts that nothing
 * past head_dim was written. */
static double attn_nmse(const char *name, const kc_attn_case *c, const float *out, size_t stride,
                        const double *ref)
{
    double num = 0, den = 0;
    for (int64_t r = 0; r < c->n_q * c->n_group; r++)
        for (size_t i = 0; i < stride; i++) {
            const float got = out[(size_t)r * stride + i];
            if ((int64_t)i >= c->head_dim) {
                cr_assert_eq(got, SENTINEL, "%s: wrote past head_dim in row %lld", name, (long long)r);
                continue;
            }
            const double e = ref[r * c->head_dim + (int64_t)i];
            num += (got - e) * (got - e);
            den += e * e;
        }
    return num / (den > 0 ? den : 1);
}

/* NMSE of rows of head_dim outputs (stride floats apart) against another call's. */
static double outputs_nmse(const float *got, const float *want, size_t rows, size_t stride, int64_t head_dim)
{
    double num = 0, den = 0;
    for (size_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < head_dim; i++) {
            const double x = got[r * stride + (size_t)i], y = want[r * stride + (size_t)i];
            num += (x - y) * (x - y);
            den += y * y;
        }
    return num / (den > 0 ? den : 1);
}

void kc_check_attn(woolly_attn_fn fn, const char *name, enum woolly_type cache_type, const kc_attn_case *c,
                   double max_nmse)
{
    const int64_t hd = c->head_dim, n = c->kv1, g = c->n_group, nq = c->n_q;
    cr_assert(hd <= WOOLLY_MAX_HEAD_DIM && g <= WOOLLY_MAX_GROUP && c->kv0 <= c->pos0 && c->kv0 < c->kv1,
              "%s: bad case", name);
    /* a ring holds what every query sees, and its end is on the kernels' block grid */
    cr_assert(!c->ring || (c->window > 0 && c->ring % WOOLLY_ATTN_RING_ALIGN == 0 &&
                           c->pos0 - c->window + 1 >= c->kv1 - c->ring && c->pos0 - c->window + 1 >= c->kv0),
              "%s: bad ring case", name);
    const int64_t n_rows = c->ring ? c->ring : n; /* rows of the cache */
    const size_t row = woolly_row_bytes(cache_type, hd);
    cr_assert(row > 0, "%s: head_dim %lld does not fit the cache type", name, (long long)hd);
    /* 2 mod 4 (row is a multiple of 4 but for odd F16 head dims): no kernel may assume rows aligned past
     * the 16-bit fields of the cache types, which the reference quantizer filling them stores. */
    const size_t kv_row_bytes = row + 2 * KV_PAD_ELEMS;
    const size_t q_stride = (size_t)hd + Q_PAD_FLOATS, rows = (size_t)(nq * g);
    tu_rng rng = {(uint64_t)(hd * 7919 + n * 31 + g * 5 + nq * 131 + c->pos0)};

    uint8_t *k = calloc(kv_row_bytes, (size_t)n_rows), *v = calloc(kv_row_bytes, (size_t)n_rows);
    float *kf = malloc(sizeof(float) * (size_t)(hd * n)), *vf = malloc(sizeof(float) * (size_t)(hd * n));
    float *q = malloc(sizeof(float) * q_stride * rows);
    float *out = malloc(sizeof(float) * q_stride * rows), *split = malloc(sizeof(float) * q_stride * rows);
    float *part[2] = {malloc(sizeof(float) * q_stride * rows), malloc(sizeof(float) * q_stride * rows)};
    float *ml[2] = {malloc(sizeof(float) * 2 * rows), malloc(sizeof(float) * 2 * rows)};
    double *p = malloc(sizeof(double) * (size_t)n), *ref = malloc(sizeof(double) * rows * (size_t)hd);
    cr_assert(k && v && kf && vf && q && out && split && part[0] && part[1] && ml[0] && ml[1] && p && ref);
    for (int64_t j = 0; j < n; j++) { /* a ring's row j % ring holds the last of its positions */
        const size_t row = (size_t)(j % n_rows) * kv_row_bytes;
        fill_cache_row(cache_type, k + row, hd, &rng, &kf[j * hd]);
        fill_cache_row(cache_type, v + row, hd, &rng, &vf[j * hd]);
    }
    for (size_t i = 0; i < q_stride * rows; i++) {
        q[i] = tu_rand_normal(&rng);
        out[i] = split[i] = part[0][i] = part[1][i] = SENTINEL;
    }
    const float scale = 1.0f / sqrtf((float)hd);
    for (int64_t t = 0; t < nq; t++)
        for (int64_t h = 0; h < g; h++)
            attn_reference(c, q, q_stride, kf, vf, scale, t, h, p, ref + (t * g + h) * hd);

    /* Queries are stored query-major: query t, head h at row t * g + h. */
    woolly_attn_args a = {.q = q,
                          .q_stride = q_stride,
                          .q_row_stride = q_stride * (size_t)g,
                          .k = k,
                          .v = v,
                          .kv_row_bytes = kv_row_bytes,
                          .n_q = nq,
                          .pos0 = c->pos0,
                          .kv0 = c->kv0,
                          .kv1 = c->kv1,
                          .window = c->window,
                          .ring = c->ring,
                          .head_dim = hd,
                          .n_group = g,
                          .scale = scale,
                          .out = out,
                          .out_stride = q_stride,
                          .out_row_stride = q_stride * (size_t)g,
                          .ml = NULL};
    fn(&a);
    const double e = attn_nmse(name, c, out, q_stride, ref);
    cr_assert(e <= max_nmse,
              "%s: head_dim=%lld group=%lld n_q=%lld pos0=%lld kv [%lld, %lld) window %lld ring %lld: NMSE "
              "%.3g > %.3g",
              name, (long long)hd, (long long)g, (long long)nq, (long long)c->pos0, (long long)c->kv0,
              (long long)c->kv1, (long long)c->window, (long long)c->ring, e, max_nmse);

    /* A lone query's path prefetches into L2 as far ahead as its caller says (a CPU class's profile), or
     * not at all: the same bits whatever it says. */
    if (nq == 1) {
        static const int32_t L2[] = {WOOLLY_ATTN_NO_L2_PREFETCH, 1, WOOLLY_ATTN_MAX_L2_BLOCKS};
        for (size_t i = 0; i < sizeof L2 / sizeof L2[0]; i++) {
            woolly_attn_args b = a;
            b.decode_l2_blocks = L2[i];
            b.out = split;
            fn(&b);
            cr_assert(!memcmp(split, out, rows * q_stride * sizeof *out),
                      "%s: decode_l2_blocks %d changed the output", name, (int)L2[i]);
        }
    }

    /* The same range split in two (as two threads would run it), combined from the partial form. */
    const int64_t mid = c->kv0 + (c->kv1 - c->kv0) / 2;
    int ran[2] = {0, 0};
    for (int half = 0; half < 2; half++) {
        woolly_attn_args b = a;
        b.kv0 = half ? mid : c->kv0;
        b.kv1 = half ? c->kv1 : mid;
        b.out = part[half];
        b.ml = ml[half];
        if ((ran[half] = b.kv0 < b.kv1))
            fn(&b);
        else
            for (size_t r = 0; r < rows; r++)
                ml[half][2 * r] = -INFINITY, ml[half][2 * r + 1] = 0.0f;
    }
    for (size_t r = 0; r < rows; r++) {
        const float *outs[2] = {part[0] + r * q_stride, part[1] + r * q_stride};
        const float *mls[2] = {ml[0] + 2 * r, ml[1] + 2 * r};
        for (int half = 0; half < 2; half++)
            if (ran[half] && mls[half][1] == 0.0f)
                for (int64_t i = 0; i < hd; i++)
                    cr_assert_eq(outs[half][i], 0.0f,
                                 "%s: a query that sees nothing of a range has a non-zero partial", name);
        woolly_attn_combine(2, outs, mls, hd, split + r * q_stride);
    }
    const double es = attn_nmse(name, c, split, q_stride, ref);
    cr_assert(
        es <= max_nmse,
        "%s: head_dim=%lld group=%lld n_q=%lld pos0=%lld kv [%lld, %lld) split at %lld: NMSE %.3g > %.3g",
        name, (long long)hd, (long long)g, (long long)nq, (long long)c->pos0, (long long)c->kv0,
        (long long)c->kv1, (long long)mid, es, max_nmse);
    const double split_max = max_nmse > KC_ATTN_SPLIT_MAX_NMSE ? max_nmse : KC_ATTN_SPLIT_MAX_NMSE;
    const double split_whole = outputs_nmse(split, out, rows, q_stride, hd);
    cr_assert(split_whole <= split_max, "%s: split and whole differ by NMSE %.3g", name, split_whole);

    /* Queries alone, as a prompt's token that comes alone asks for it (the runtime's kv1): the first, the
     * middle and the last, each within KC_ATTN_ALONE_MAX_NMSE of its rows of the whole call. Each costs a
     * whole tile; every query of a block alone was a seventh of the sanitizer build's AVX2 kernel tests.
     * The cases move the diagonal across the tiles instead. */
    for (int64_t t = 0; nq > 1 && t < nq; t++) {
        if (t != 0 && t != nq / 2 && t != nq - 1)
            continue;
        woolly_attn_args b = a;
        const int64_t causal = c->pos0 + t + 1;
        const size_t at = (size_t)(t * g) * q_stride;
        b.q = q + at;
        b.out = split + at;
        b.n_q = 1;
        b.pos0 = c->pos0 + t;
        b.kv1 = causal < c->kv1 ? causal : c->kv1;
        b.one_query_tiles = 1;
        fn(&b);
        const double alone = outputs_nmse(split + at, out + at, (size_t)g, q_stride, hd);
        cr_assert(alone <= KC_ATTN_ALONE_MAX_NMSE,
                  "%s: n_q=%lld pos0=%lld: query %lld alone and together, NMSE %.3g", name, (long long)nq,
                  (long long)c->pos0, (long long)t, alone);
    }
    free(k), free(v), free(kf), free(vf), free(q), free(out), free(split), free(part[0]), free(part[1]);
    free(ml[0]), free(ml[1]), free(p), free(ref);
}
