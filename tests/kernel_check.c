#include "kernel_check.h"

#include "harness.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "registry.h"
#include "testutil.h"

/* Paddings that are not multiples of anything, so that a kernel assuming packed rows is caught. */
enum { X_PAD_FLOATS = 5, Y_PAD_FLOATS = 7, KV_PAD_ELEMS = 3, Q_PAD_FLOATS = 11 };
static const float SENTINEL = -12345.0f;

/* The scalar reference packer of an activation format (the oracle's view of the activations). */
static woolly_pack_fn reference_packer(enum woolly_act act)
{
    const char *name = act == WOOLLY_ACT_F16 ? "pack_f16_scalar" : "pack_q8_scalar";
    const woolly_kernel *k = woolly_kernel_by_name(name);
    cr_assert(k && k->pack, "no %s in the registry", name);
    return k->pack;
}

/* The packed row's values as the kernel sees them, in double. */
static void unpack_act(enum woolly_act act, const void *row, int64_t k, double *out)
{
    if (act == WOOLLY_ACT_F16) {
        for (int64_t i = 0; i < k; i++)
            out[i] = woolly_f16_to_f32(((const uint16_t *)row)[i]);
        return;
    }
    const woolly_block_q8x32 *b = row;
    for (int64_t i = 0; i < k; i++)
        out[i] = (double)b[i / 32].d * b[i / 32].q[i % 32];
}

void kc_check_matmul(const kc_matmul_kernel *kern, const kc_matmul_case *c, double max_nmse)
{
    const char *name = kern->name;
    const int64_t rows = c->r1 + 2, k = c->k, m = c->m;
    const size_t row_bytes = woolly_row_bytes(kern->wtype, k);
    cr_assert(row_bytes > 0, "%s: k=%lld is not a whole number of blocks", name, (long long)k);
    tu_rng rng = {(uint64_t)(k * 1000003 + m * 101 + c->r0 * 7 + c->r1)};

    uint8_t *w = malloc(row_bytes * (size_t)rows);
    float *src = malloc(sizeof(float) * (size_t)k);
    float *wf = malloc(sizeof(float) * (size_t)(k * rows));
    const size_t x_stride = (size_t)k + X_PAD_FLOATS, y_stride = (size_t)rows + Y_PAD_FLOATS;
    float *x = malloc(sizeof(float) * x_stride * (size_t)m);
    float *y = malloc(sizeof(float) * y_stride * (size_t)m);
    double *xd = malloc(sizeof(double) * (size_t)k * (size_t)m);
    cr_assert(w && src && wf && x && y && xd);

    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < k; i++)
            src[i] = 0.02f * tu_rand_normal(&rng);
        cr_assert_eq(woolly_quantize_row(kern->wtype, src, w + (size_t)r * row_bytes, k), row_bytes);
        cr_assert_eq(woolly_dequantize_row(kern->wtype, w + (size_t)r * row_bytes, wf + r * k, k), 0);
    }
    for (size_t i = 0; i < x_stride * (size_t)m; i++)
        x[i] = tu_rand_normal(&rng);
    for (size_t i = 0; i < y_stride * (size_t)m; i++)
        y[i] = c->accumulate ? (float)(i % 5) - 2.0f : SENTINEL;

    /* The activations in the kernel's format, rows padded to a prime number of bytes past their end. */
    const void *xk = x;
    size_t x_row_bytes = x_stride * sizeof(float);
    uint8_t *packed = NULL;
    if (kern->act == WOOLLY_ACT_F32) {
        for (int64_t t = 0; t < m; t++)
            for (int64_t i = 0; i < k; i++)
                xd[t * k + i] = x[(size_t)t * x_stride + (size_t)i];
    } else {
        const woolly_pack_fn pack = reference_packer(kern->act);
        const size_t pb = kern->act == WOOLLY_ACT_F16 ? (size_t)k * 2 : (size_t)k / 32 * sizeof(woolly_block_q8x32);
        x_row_bytes = pb + (kern->act == WOOLLY_ACT_F16 ? 2 * X_PAD_FLOATS : sizeof(woolly_block_q8x32));
        packed = malloc(x_row_bytes * (size_t)m);
        cr_assert(packed);
        for (int64_t t = 0; t < m; t++) {
            pack(x + (size_t)t * x_stride, k, packed + (size_t)t * x_row_bytes);
            unpack_act(kern->act, packed + (size_t)t * x_row_bytes, k, xd + t * k);
        }
        xk = packed;
    }

    /* The weights in the kernel's layout. */
    const void *wk = w;
    size_t w_row_bytes = row_bytes;
    uint8_t *repacked = NULL;
    if (kern->repack) {
        const int64_t g = kern->layout_rows, groups = (rows + g - 1) / g;
        cr_assert(c->r0 % g == 0, "%s: case r0=%lld is not a whole group", name, (long long)c->r0);
        w_row_bytes = (size_t)(k / woolly_type_get(kern->wtype)->block_elems) * kern->layout_block_bytes / (size_t)g;
        repacked = malloc(w_row_bytes * (size_t)(groups * g));
        cr_assert(repacked);
        kern->repack(&(woolly_repack_args){.src = w, .src_row_bytes = row_bytes, .dst = repacked,
                                           .dst_row_bytes = w_row_bytes, .k = k, .r0 = 0, .r1 = rows});
        wk = repacked;
    }

    woolly_matmul_args a = {.w = wk, .w_row_bytes = w_row_bytes, .x = xk, .x_row_bytes = x_row_bytes,
                            .y = y, .y_stride = y_stride, .k = k, .m = m, .r0 = c->r0, .r1 = c->r1,
                            .accumulate = c->accumulate, .prefetch = c->prefetch};
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
                ref += (double)wf[(int64_t)r * k + i] * xd[t * k + i];
            const double v = c->accumulate ? (double)got - before : got;
            num += (v - ref) * (v - ref);
            den += ref * ref;
        }
    const double nmse = num / (den > 0 ? den : 1);
    cr_assert(nmse <= max_nmse, "%s: k=%lld m=%lld rows [%lld, %lld)%s: NMSE %.3g > %.3g", name, (long long)k,
              (long long)m, (long long)c->r0, (long long)c->r1, c->accumulate ? " accumulating" : "", nmse,
              max_nmse);
    free(w), free(src), free(wf), free(x), free(y), free(xd), free(packed), free(repacked);
}

void kc_check_layout(const kc_layout *l, int64_t k, int64_t rows)
{
    const size_t row_bytes = woolly_row_bytes(l->wtype, k);
    const int64_t g = l->rows, groups = (rows + g - 1) / g;
    const size_t lay_row_bytes = (size_t)(k / woolly_type_get(l->wtype)->block_elems) * l->block_bytes / (size_t)g;
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
            cr_assert(!memcmp(back, w + (size_t)r * row_bytes, row_bytes), "%s: k=%lld row %lld of %lld changed by the round trip",
                      l->name, (long long)k, (long long)r, (long long)rows);
        } else {
            cr_assert_eq(woolly_dequantize_row(l->wtype, back, deq, k), 0);
            for (int64_t i = 0; i < k; i++)
                cr_assert_eq(deq[i], 0.0f, "%s: padding row %lld is not zero at %lld", l->name, (long long)r,
                             (long long)i);
        }
    }
    free(w), free(back), free(lay), free(zero), free(src), free(deq);
}

void kc_check_pack(woolly_pack_fn fn, const char *name, enum woolly_act act, int64_t k)
{
    const woolly_pack_fn ref = reference_packer(act);
    const size_t bytes = act == WOOLLY_ACT_F16 ? (size_t)k * 2 : (size_t)k / 32 * sizeof(woolly_block_q8x32);
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
        memset(got, 0x5A, bytes + 1);
        memset(want, 0x5A, bytes + 1);
        fn(x, k, got);
        ref(x, k, want);
        cr_assert_eq(got[bytes], 0x5A, "%s: wrote past the packed row (k=%lld)", name, (long long)k);
        for (size_t i = 0; i < bytes; i++)
            cr_assert_eq(got[i], want[i], "%s: k=%lld trial %d: byte %zu is %u, the reference gives %u", name,
                         (long long)k, trial, i, got[i], want[i]);
    }
    free(x), free(got), free(want);
}

static void store_cache(enum woolly_type t, void *dst, size_t i, float v, float *back)
{
    if (t == WOOLLY_TYPE_F16) {
        uint16_t h = woolly_f32_to_f16(v);
        ((uint16_t *)dst)[i] = h;
        *back = woolly_f16_to_f32(h);
    } else {
        ((float *)dst)[i] = v;
        *back = v;
    }
}

void kc_check_attn(woolly_attn_fn fn, const char *name, enum woolly_type cache_type, const kc_attn_case *c,
                   double max_nmse)
{
    cr_assert(cache_type == WOOLLY_TYPE_F16 || cache_type == WOOLLY_TYPE_F32, "%s: cache type", name);
    const int64_t hd = c->head_dim, n = c->n_kv, g = c->n_group;
    const size_t elem = cache_type == WOOLLY_TYPE_F16 ? 2 : 4;
    const size_t kv_stride = (size_t)hd + KV_PAD_ELEMS, q_stride = (size_t)hd + Q_PAD_FLOATS;
    tu_rng rng = {(uint64_t)(hd * 7919 + n * 31 + g)};

    void *k = malloc(elem * kv_stride * (size_t)n), *v = malloc(elem * kv_stride * (size_t)n);
    float *kf = malloc(sizeof(float) * (size_t)(hd * n)), *vf = malloc(sizeof(float) * (size_t)(hd * n));
    float *q = malloc(sizeof(float) * q_stride * (size_t)g), *out = malloc(sizeof(float) * q_stride * (size_t)g);
    double *p = malloc(sizeof(double) * (size_t)n);
    cr_assert(k && v && kf && vf && q && out && p);
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < hd; i++) {
            store_cache(cache_type, k, (size_t)j * kv_stride + (size_t)i, tu_rand_normal(&rng), &kf[j * hd + i]);
            store_cache(cache_type, v, (size_t)j * kv_stride + (size_t)i, tu_rand_normal(&rng), &vf[j * hd + i]);
        }
    for (size_t i = 0; i < q_stride * (size_t)g; i++)
        q[i] = tu_rand_normal(&rng), out[i] = SENTINEL;
    const float scale = 1.0f / sqrtf((float)hd);

    woolly_attn_args a = {.q = q, .q_stride = q_stride, .k = k, .v = v, .kv_stride = kv_stride, .n_kv = n,
                          .head_dim = hd, .n_group = g, .scale = scale, .out = out, .out_stride = q_stride};
    fn(&a);

    double num = 0, den = 0;
    for (int64_t h = 0; h < g; h++) {
        const float *qh = q + (size_t)h * q_stride;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t i = 0; i < hd; i++)
                s += (double)qh[i] * kf[j * hd + i];
            p[j] = s * scale;
            mx = p[j] > mx ? p[j] : mx;
        }
        for (int64_t j = 0; j < n; j++)
            sum += (p[j] = exp(p[j] - mx));
        for (int64_t i = 0; i < (int64_t)q_stride; i++) {
            const float got = out[(size_t)h * q_stride + (size_t)i];
            if (i >= hd) {
                cr_assert_eq(got, SENTINEL, "%s: wrote past head_dim in head %lld", name, (long long)h);
                continue;
            }
            double ref = 0;
            for (int64_t j = 0; j < n; j++)
                ref += p[j] / sum * vf[j * hd + i];
            num += (got - ref) * (got - ref);
            den += ref * ref;
        }
    }
    const double nmse = num / (den > 0 ? den : 1);
    cr_assert(nmse <= max_nmse, "%s: head_dim=%lld n_kv=%lld group=%lld: NMSE %.3g > %.3g", name, (long long)hd,
              (long long)n, (long long)g, nmse, max_nmse);
    free(k), free(v), free(kf), free(vf), free(q), free(out), free(p);
}
