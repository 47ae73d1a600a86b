#include "matmul.h"

#include <string.h>

woolly_matrix woolly_matrix_rows(const void *data, enum woolly_type type, int64_t rows, int64_t cols,
                                 const char *name)
{
    return (woolly_matrix){data, type, rows, cols, woolly_row_bytes(type, cols), NULL, WOOLLY_ACT_F32, name, -1};
}

size_t woolly_act_row_bytes(enum woolly_act act, int64_t k)
{
    switch (act) {
    case WOOLLY_ACT_F32:
        return (size_t)k * sizeof(float);
    case WOOLLY_ACT_F16:
    case WOOLLY_ACT_BF16:
        return (size_t)k * sizeof(uint16_t);
    case WOOLLY_ACT_Q8:
        return k % 32 ? 0 : (size_t)(k / 32) * sizeof(woolly_block_q8x32);
    case WOOLLY_ACT_COUNT:
        break;
    }
    return 0;
}

int woolly_matmul_plan_init(woolly_matmul_plan *p, const woolly_matrix *w, woolly_error *err)
{
    const woolly_type_info *ti = woolly_type_get(w->type);
    const char *tn = ti ? ti->name : "?";
    if ((unsigned)w->act >= WOOLLY_ACT_COUNT)
        return woolly_fail(err, "matmul: activation format %d is unknown", (int)w->act);
    *p = (woolly_matmul_plan){0};
    p->gemv = woolly_kernel_choose(WOOLLY_OP_GEMV, w->type, w->act, w->layout);
    p->gemm = woolly_kernel_choose(WOOLLY_OP_GEMM, w->type, w->act, w->layout);
    if (!p->gemv || !p->gemm)
        return woolly_fail(err, "matmul: no %s kernel for %s weights (layout %s) with %s activations",
                           p->gemv ? "GEMM" : "GEMV", tn, w->layout ? w->layout->name : "rows",
                           woolly_act_name(w->act));
    if (w->act != WOOLLY_ACT_F32) {
        const woolly_kernel *pk = woolly_kernel_choose_pack(w->act);
        if (!pk)
            return woolly_fail(err, "matmul: no packer for %s activations", woolly_act_name(w->act));
        p->pack = pk->pack;
    }
    return 0;
}

void woolly_act_pack(enum woolly_act act, const float *x, size_t x_stride, int64_t t0, int64_t t1, int64_t k,
                     void *dst, size_t row_bytes)
{
    const woolly_kernel *pk = woolly_kernel_choose_pack(act);
    for (int64_t t = t0; t < t1; t++) {
        const float *src = x + (size_t)t * x_stride;
        void *row = (char *)dst + (size_t)t * row_bytes;
        if (pk)
            pk->pack(src, k, row);
        else
            memcpy(row, src, (size_t)k * sizeof(float));
    }
}

typedef struct matmul_job {
    const woolly_matmul_out *outs;
    int n;
    const float *x; /* unpacked input */
    const void *xk; /* what the kernels read: x or its packed form */
    size_t x_row_bytes;
    int64_t m, k, total_rows;
    enum woolly_act act;
    woolly_pack_fn pack;
} matmul_job;

static void pack_job(void *arg, int ith, int nth)
{
    const matmul_job *j = arg;
    long long t0, t1;
    woolly_split_range(j->m, 1, ith, nth, &t0, &t1);
    for (long long t = t0; t < t1; t++)
        j->pack(j->x + (size_t)t * (size_t)j->k, j->k, (char *)j->xk + (size_t)t * j->x_row_bytes);
}

static const woolly_kernel *kernel_of(const matmul_job *j, int i)
{
    return j->m == 1 ? j->outs[i].plan->gemv : j->outs[i].plan->gemm;
}

/* Where the split point p (a row of all the outputs' rows, end to end) falls: output *i, at a row
 * rounded down to that kernel's tile, so that only the last call of a matrix has a partial tile. Two
 * threads that meet at p compute the same place. */
static int64_t split_point(const matmul_job *j, int64_t p, int *i)
{
    for (*i = 0; *i < j->n; (*i)++) {
        const int64_t rows = j->outs[*i].w->rows;
        if (p < rows) {
            const int64_t tile = kernel_of(j, *i)->tile_n;
            return p / tile * tile;
        }
        p -= rows;
    }
    return 0;
}

/* Rows [r0, r1) of one output, in the plan's blocks of rows, tokens and columns. */
static void run_rows(const matmul_job *j, int i, int64_t r0, int64_t r1)
{
    const woolly_matmul_out *o = &j->outs[i];
    const woolly_matmul_plan *pl = o->plan;
    const woolly_kernel *kern = kernel_of(j, i);
    const woolly_matrix *w = o->w;
    const int64_t rstep = pl->rows_per_call > 0 ? pl->rows_per_call : r1 - r0;
    const int64_t tstep = pl->tokens_per_call > 0 && j->m > 1 ? pl->tokens_per_call : j->m;
    const int64_t kstep = pl->k_per_call > 0 ? pl->k_per_call : j->k;
    const woolly_type_info *ti = woolly_type_get(w->type);
    /* Bytes of one weight block column (per row in GGUF rows, per group in a layout) and of one
     * activation: a k offset is a pointer offset in both. */
    const size_t wblock = w->layout ? w->layout->block_bytes : ti->block_bytes;
    const size_t x_per_32 = woolly_act_row_bytes(j->act, 32);
    for (int64_t ra = r0; ra < r1; ra += rstep)
        for (int64_t t = 0; t < j->m; t += tstep)
            for (int64_t k0 = 0; k0 < j->k; k0 += kstep) {
                const woolly_matmul_args a = {
                    .w = (const char *)w->data + (size_t)(k0 / ti->block_elems) * wblock,
                    .w_row_bytes = w->row_bytes,
                    .x = (const char *)j->xk + (size_t)t * j->x_row_bytes + (size_t)k0 / 32 * x_per_32,
                    .x_row_bytes = j->x_row_bytes,
                    .y = o->y + (size_t)t * o->y_stride,
                    .y_stride = o->y_stride,
                    .k = kstep < j->k - k0 ? kstep : j->k - k0,
                    .m = tstep < j->m - t ? tstep : j->m - t,
                    .r0 = ra,
                    .r1 = rstep < r1 - ra ? ra + rstep : r1,
                    .accumulate = k0 > 0,
                    .prefetch = pl->prefetch,
                };
                kern->matmul(&a);
            }
}

static void matmul_job_run(void *arg, int ith, int nth)
{
    const matmul_job *j = arg;
    int i0, i1;
    const int64_t o0 = split_point(j, j->total_rows * ith / nth, &i0);
    const int64_t o1 = split_point(j, j->total_rows * (ith + 1) / nth, &i1);
    for (int i = i0; i <= i1 && i < j->n; i++) {
        const int64_t r0 = i == i0 ? o0 : 0, r1 = i == i1 ? o1 : j->outs[i].w->rows;
        if (r0 < r1)
            run_rows(j, i, r0, r1);
    }
}

/* Multiply-adds below which another thread does not pay for waking it (a few microseconds). */
#define MATMUL_MIN_WORK_PER_THREAD 65536.0

void woolly_matmul_n(woolly_threadpool *pool, const woolly_matmul_out *outs, int n, const float *x, int64_t m,
                     void *pack)
{
    const woolly_matrix *w0 = outs[0].w;
    matmul_job j = {
        .outs = outs,
        .n = n,
        .x = x,
        .xk = x,
        .x_row_bytes = woolly_act_row_bytes(w0->act, w0->cols),
        .m = m,
        .k = w0->cols,
        .act = w0->act,
        .pack = outs[0].plan->pack,
    };
    for (int i = 0; i < n; i++)
        j.total_rows += outs[i].w->rows;
    const int nth = woolly_threads_for(pool, (double)m * (double)j.total_rows * (double)j.k,
                                       MATMUL_MIN_WORK_PER_THREAD);
    if (j.act != WOOLLY_ACT_F32) {
        j.xk = pack;
        if (m == 1)
            j.pack(x, j.k, pack);
        else
            woolly_threadpool_run_n(pool, pack_job, &j, nth);
    }
    woolly_threadpool_run_n(pool, matmul_job_run, &j, nth);
}

void woolly_matmul(woolly_threadpool *pool, const woolly_matmul_plan *plan, const woolly_matrix *w,
                   const float *x, int64_t m, float *y, size_t y_stride, void *pack)
{
    const woolly_matmul_out o = {w, plan, y, y_stride};
    woolly_matmul_n(pool, &o, 1, x, m, pack);
}
