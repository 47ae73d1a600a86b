#include "matmul.h"

#include <math.h>

static const char *const ACT_NAMES[] = {"f32", "f16", "q8"};

const char *woolly_act_name(enum woolly_act act)
{
    return (unsigned)act < sizeof ACT_NAMES / sizeof ACT_NAMES[0] ? ACT_NAMES[act] : "?";
}

size_t woolly_act_row_bytes(enum woolly_act act, int64_t k)
{
    switch (act) {
    case WOOLLY_ACT_F32:
        return (size_t)k * sizeof(float);
    case WOOLLY_ACT_F16:
        return (size_t)k * sizeof(uint16_t);
    case WOOLLY_ACT_Q8:
        return k % 32 ? 0 : (size_t)(k / 32) * sizeof(woolly_block_q8x32);
    }
    return 0;
}

int woolly_matmul_plan_init(woolly_matmul_plan *p, enum woolly_type wtype, enum woolly_act act,
                            woolly_error *err)
{
    const woolly_type_info *ti = woolly_type_get(wtype);
    const char *tn = ti ? ti->name : "?";
    if ((unsigned)act >= sizeof ACT_NAMES / sizeof ACT_NAMES[0])
        return woolly_fail(err, "matmul: activation format %d is unknown", (int)act);
    p->act = act;
    p->gemv = woolly_kernel_choose(WOOLLY_OP_GEMV, wtype, act);
    p->gemm = woolly_kernel_choose(WOOLLY_OP_GEMM, wtype, act);
    if (!p->gemv || !p->gemm)
        return woolly_fail(err, "matmul: no %s kernel for %s weights with %s activations",
                           p->gemv ? "GEMM" : "GEMV", tn, woolly_act_name(act));
    return 0;
}

static void pack_q8(const float *x, int64_t k, woolly_block_q8x32 *b)
{
    for (int64_t j = 0; j < k / 32; j++, b++) {
        const float *v = x + j * 32;
        float amax = 0.0f;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(v[i]));
        const float d = amax / 127.0f, inv = d > 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int i = 0; i < 32; i++) {
            b->q[i] = (int8_t)lrintf(v[i] * inv);
            sum += b->q[i];
        }
        b->d = d;
        b->s = d * (float)sum;
    }
}

void woolly_act_pack(enum woolly_act act, const float *x, size_t x_stride, int64_t t0, int64_t t1, int64_t k,
                     void *dst, size_t row_bytes)
{
    for (int64_t t = t0; t < t1; t++) {
        const float *src = x + (size_t)t * x_stride;
        void *row = (char *)dst + (size_t)t * row_bytes;
        switch (act) {
        case WOOLLY_ACT_F32:
            memcpy(row, src, (size_t)k * sizeof(float));
            break;
        case WOOLLY_ACT_F16:
            for (int64_t i = 0; i < k; i++)
                ((uint16_t *)row)[i] = woolly_f32_to_f16(src[i]);
            break;
        case WOOLLY_ACT_Q8:
            pack_q8(src, k, row);
            break;
        }
    }
}

typedef struct matmul_job {
    const woolly_matmul_plan *plan;
    const woolly_kernel *kernel;
    woolly_matmul_args args; /* r0, r1 set per thread */
    const float *x;          /* unpacked input, for the packing pass */
    void *packed;
} matmul_job;

static void pack_job(void *arg, int ith, int nth)
{
    const matmul_job *j = arg;
    long long t0, t1;
    woolly_split_range(j->args.m, 1, ith, nth, &t0, &t1);
    woolly_act_pack(j->plan->act, j->x, (size_t)j->args.k, t0, t1, j->args.k, j->packed, j->args.x_row_bytes);
}

static void matmul_job_run(void *arg, int ith, int nth)
{
    const matmul_job *j = arg;
    woolly_matmul_args a = j->args;
    long long r0, r1;
    /* Chunks aligned to the kernel's register tile, so that only the last one has a partial tile. */
    woolly_split_range(a.r1, j->kernel->tile_n, ith, nth, &r0, &r1);
    if (r0 >= r1)
        return;
    a.r0 = r0;
    a.r1 = r1;
    j->kernel->matmul(&a);
}

/* Multiply-adds below which another thread does not pay for waking it (a few tens of microseconds). */
#define MATMUL_MIN_WORK_PER_THREAD 65536.0

void woolly_matmul(woolly_threadpool *pool, const woolly_matmul_plan *plan, const woolly_matrix *w,
                   const float *x, int64_t m, float *y, size_t y_stride, void *pack)
{
    matmul_job j = {
        .plan = plan,
        .kernel = m == 1 ? plan->gemv : plan->gemm,
        .args = {.w = w->data,
                 .w_row_bytes = w->row_bytes,
                 .x = x,
                 .x_row_bytes = woolly_act_row_bytes(plan->act, w->cols),
                 .y = y,
                 .y_stride = y_stride,
                 .k = w->cols,
                 .m = m,
                 .r0 = 0,
                 .r1 = w->rows},
        .x = x,
        .packed = pack,
    };
    const int nth =
        woolly_threads_for(pool, (double)m * (double)w->rows * (double)w->cols, MATMUL_MIN_WORK_PER_THREAD);
    if (plan->act != WOOLLY_ACT_F32) {
        woolly_threadpool_run_n(pool, pack_job, &j, nth);
        j.args.x = pack;
    }
    woolly_threadpool_run_n(pool, matmul_job_run, &j, nth);
}
