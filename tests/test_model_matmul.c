/* The runtime's side of the kernels: the thread pool, the split of weight rows across threads, the
 * matmul wrapper (against a direct kernel call and a float64 reference) and the activation packers a
 * non-F32 plan would use. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "matmul.h"
#include "quant.h"
#include "testutil.h"
#include "threadpool.h"

Test(threadpool, split_range_covers_every_item_once_in_aligned_chunks)
{
    const long long ns[] = {0, 1, 7, 64, 100, 1001};
    const int aligns[] = {1, 4, 16};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof aligns / sizeof aligns[0]; b++)
            for (int nth = 1; nth <= 5; nth++) {
                long long expect_lo = 0;
                for (int ith = 0; ith < nth; ith++) {
                    long long lo, hi;
                    woolly_split_range(ns[a], aligns[b], ith, nth, &lo, &hi);
                    cr_assert_eq(lo, expect_lo, "n %lld align %d thread %d/%d starts at %lld", ns[a],
                                 aligns[b], ith, nth, lo);
                    cr_assert(lo <= hi && hi <= ns[a]);
                    cr_assert(lo % aligns[b] == 0 || lo == ns[a], "chunk start %lld not aligned to %d", lo,
                              aligns[b]);
                    expect_lo = hi;
                }
                cr_assert_eq(expect_lo, ns[a], "n %lld align %d over %d threads: covered %lld", ns[a],
                             aligns[b], nth, expect_lo);
            }
}

typedef struct counts {
    atomic_int calls[8];
    atomic_int nth_seen;
} counts;

static void count_job(void *arg, int ith, int nth)
{
    counts *c = arg;
    atomic_fetch_add(&c->calls[ith], 1);
    atomic_store(&c->nth_seen, nth);
}

Test(threadpool, every_thread_runs_every_job_once)
{
    woolly_error err = {{0}};
    woolly_threadpool *p = woolly_threadpool_open(4, &err);
    cr_assert(p != NULL, "%s", err.msg);
    cr_expect_eq(woolly_threadpool_size(p), 4);
    static counts c;
    for (int i = 0; i < 2000; i++)
        woolly_threadpool_run(p, count_job, &c);
    for (int t = 0; t < 4; t++)
        cr_expect_eq(atomic_load(&c.calls[t]), 2000, "thread %d ran %d jobs", t, atomic_load(&c.calls[t]));
    memset(&c, 0, sizeof c);
    for (int i = 0; i < 100; i++)
        woolly_threadpool_run_n(p, count_job, &c, 2);
    cr_expect_eq(atomic_load(&c.calls[0]), 100);
    cr_expect_eq(atomic_load(&c.calls[1]), 100);
    cr_expect_eq(atomic_load(&c.calls[2]), 0, "a thread outside n_use ran the job");
    cr_expect_eq(atomic_load(&c.nth_seen), 2);
    woolly_threadpool_run_n(p, count_job, &c, 1);
    cr_expect_eq(atomic_load(&c.calls[0]), 101);
    cr_expect_eq(atomic_load(&c.calls[1]), 100, "n_use 1 runs on the caller only");
    woolly_threadpool_close(p);

    cr_expect_null(woolly_threadpool_open(0, &err));
    cr_expect(strstr(err.msg, "thread count 0") != NULL, "%s", err.msg);
    cr_expect_null(woolly_threadpool_open(WOOLLY_MAX_THREADS + 1, &err));
}

Test(threadpool, threads_for_small_and_large_work)
{
    woolly_error err = {{0}};
    woolly_threadpool *p = woolly_threadpool_open(3, &err);
    cr_assert(p != NULL, "%s", err.msg);
    cr_expect_eq(woolly_threads_for(p, 10, 100), 1);
    cr_expect_eq(woolly_threads_for(p, 250, 100), 2);
    cr_expect_eq(woolly_threads_for(p, 1e9, 100), 3);
    woolly_threadpool_close(p);
}

/* Q4_K weights of rows x k, random; their dequantized floats in *deq. */
static void *random_q4k(int64_t rows, int64_t k, float **deq)
{
    const size_t rb = woolly_row_bytes(WOOLLY_TYPE_Q4_K, k);
    uint8_t *w = malloc(rb * (size_t)rows);
    float *row = malloc(sizeof(float) * (size_t)k);
    *deq = malloc(sizeof(float) * (size_t)(rows * k));
    cr_assert(w && row && *deq);
    tu_rng rng = {7};
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < k; i++)
            row[i] = tu_rand_normal(&rng);
        cr_assert_eq(woolly_quantize_row(WOOLLY_TYPE_Q4_K, row, w + (size_t)r * rb, k), rb);
        cr_assert_eq(woolly_dequantize_row(WOOLLY_TYPE_Q4_K, w + (size_t)r * rb, *deq + r * k, k), 0);
    }
    free(row);
    return w;
}

Test(matmul, threads_split_rows_without_changing_the_result)
{
    enum { ROWS = 37, K = 4096, M = 5 }; /* large enough that woolly_matmul uses every thread */
    float *deq;
    void *wdata = random_q4k(ROWS, K, &deq);
    const woolly_matrix w = woolly_matrix_rows(wdata, WOOLLY_TYPE_Q4_K, ROWS, K, "w");
    woolly_matmul_plan plan;
    woolly_error err = {{0}};
    cr_assert_eq(woolly_matmul_plan_init(&plan, &w, NULL, &err), 0, "%s", err.msg);
    static float x[M * K], y[M * ROWS], direct[M * ROWS];
    tu_rng rng = {11};
    for (int i = 0; i < M * K; i++)
        x[i] = tu_rand_normal(&rng);

    for (int m = 1; m <= M; m += M - 1) { /* the GEMV slot (m = 1) and the GEMM slot */
        const woolly_kernel *k = plan.step[woolly_tokens_class_of(m)].kernel;
        const woolly_matmul_args a = {.w = w.data,
                                      .w_row_bytes = w.row_bytes,
                                      .x = x,
                                      .x_row_bytes = K * sizeof(float),
                                      .y = direct,
                                      .y_stride = ROWS,
                                      .k = K,
                                      .m = m,
                                      .r0 = 0,
                                      .r1 = ROWS};
        k->matmul(&a);
        double num = 0, den = 0;
        for (int t = 0; t < m; t++)
            for (int r = 0; r < ROWS; r++) {
                double ref = 0;
                for (int i = 0; i < K; i++)
                    ref += (double)deq[r * K + i] * x[t * K + i];
                num += (direct[t * ROWS + r] - ref) * (direct[t * ROWS + r] - ref);
                den += ref * ref;
            }
        cr_expect_leq(num / den, 1e-10, "%s against float64: NMSE %g", k->name, num / den);
        for (int nth = 1; nth <= 3; nth++) {
            woolly_threadpool *p = woolly_threadpool_open(nth, &err);
            cr_assert(p != NULL, "%s", err.msg);
            memset(y, 0xFF, sizeof y);
            woolly_matmul(p, &plan, &w, x, m, y, ROWS, NULL);
            cr_expect(memcmp(y, direct, sizeof(float) * (size_t)(m * ROWS)) == 0,
                      "m %d, %d threads: differs from one kernel call over all rows", m, nth);
            woolly_threadpool_close(p);
        }
    }
    free(wdata);
    free(deq);
}

/* Rows each thread ran and the calls that covered each row, seen by the observer; thread 0 is made slow. */
enum { SLOW_ROWS = 1024, SLOW_K = 1024 };
static atomic_int g_row_calls[SLOW_ROWS];
static atomic_llong g_thread_rows[3];

static void observe_slow_thread0(const woolly_matrix *w, const woolly_kernel *k, const woolly_matmul_args *a,
                                 int ith, int nth)
{
    (void)w, (void)k, (void)nth;
    for (int64_t r = a->r0; r < a->r1; r++)
        atomic_fetch_add(&g_row_calls[r], 1);
    atomic_fetch_add(&g_thread_rows[ith], a->r1 - a->r0);
    if (ith == 0) {
        /* Long enough for the other two to finish all the other rows first even in the sanitizer build
         * sharing two cores with another test: at 50 ms that build once saw the slow thread take a
         * shared chunk. */
        const struct timespec slow = {0, 250 * 1000 * 1000};
        nanosleep(&slow, NULL);
    }
}

/* A thread slowed by something outside the job leaves the rows after its own share to the others:
 * every row is still computed once, the result is unchanged, and the slow thread runs no more than
 * its own share. */
Test(matmul, a_slow_thread_leaves_the_shared_rows_to_the_others)
{
    enum { M = 5 };
    float *deq;
    void *wdata = random_q4k(SLOW_ROWS, SLOW_K, &deq);
    const woolly_matrix w = woolly_matrix_rows(wdata, WOOLLY_TYPE_Q4_K, SLOW_ROWS, SLOW_K, "w");
    woolly_matmul_plan plan;
    woolly_error err = {{0}};
    cr_assert_eq(woolly_matmul_plan_init(&plan, &w, NULL, &err), 0, "%s", err.msg);
    static float x[M * SLOW_K], y[M * SLOW_ROWS], want[M * SLOW_ROWS];
    tu_rng rng = {5};
    for (int i = 0; i < M * SLOW_K; i++)
        x[i] = tu_rand_normal(&rng);
    woolly_threadpool *one = woolly_threadpool_open(1, &err), *three = woolly_threadpool_open(3, &err);
    cr_assert(one && three, "%s", err.msg);
    for (int m = 1; m <= M; m += M - 1) {
        woolly_matmul(one, &plan, &w, x, m, want, SLOW_ROWS, NULL);
        for (int r = 0; r < SLOW_ROWS; r++)
            atomic_init(&g_row_calls[r], 0);
        for (int t = 0; t < 3; t++)
            atomic_init(&g_thread_rows[t], 0);
        memset(y, 0xFF, sizeof y);
        woolly_matmul_set_observer(observe_slow_thread0);
        woolly_matmul(three, &plan, &w, x, m, y, SLOW_ROWS, NULL);
        woolly_matmul_set_observer(NULL);
        cr_expect(memcmp(y, want, sizeof(float) * (size_t)(m * SLOW_ROWS)) == 0,
                  "m %d: 3 threads, one slow, differ from one thread", m);
        for (int r = 0; r < SLOW_ROWS; r++)
            cr_expect_eq(atomic_load(&g_row_calls[r]), 1, "m %d: row %d computed %d times", m, r,
                         atomic_load(&g_row_calls[r]));
        const long long slow = atomic_load(&g_thread_rows[0]);
        /* Its own share: a third of the first three quarters (a static split would give it a third). */
        cr_expect(slow <= SLOW_ROWS / 4, "m %d: the slow thread ran %lld rows, more than its own share of %d",
                  m, slow, SLOW_ROWS / 4);
    }
    woolly_threadpool_close(one);
    woolly_threadpool_close(three);
    free(wdata);
    free(deq);
}

/* The kernels the observer saw run, for the min_tokens test. */
static const woolly_kernel *_Atomic g_seen_kernel;
static atomic_int g_seen_other;

static void observe_kernel(const woolly_matrix *w, const woolly_kernel *k, const woolly_matmul_args *a,
                           int ith, int nth)
{
    (void)w, (void)a, (void)ith, (void)nth;
    const woolly_kernel *none = NULL;
    if (!atomic_compare_exchange_strong(&g_seen_kernel, &none, k) && atomic_load(&g_seen_kernel) != k)
        atomic_fetch_add(&g_seen_other, 1);
}

/* A 17+ kernel with a min_tokens runs from that many tokens; fewer (past 16) take the 2-16 step, with the
 * same result. */
Test(matmul, a_large_kernel_runs_from_its_min_tokens)
{
    enum { ROWS = 64, K = 512, M = 40, MIN = 32 };
    float *deq;
    void *wdata = random_q4k(ROWS, K, &deq);
    const woolly_matrix w = woolly_matrix_rows(wdata, WOOLLY_TYPE_Q4_K, ROWS, K, "w");
    woolly_matmul_plan plan;
    woolly_error err = {{0}};
    cr_assert_eq(woolly_matmul_plan_init(&plan, &w, NULL, &err), 0, "%s", err.msg);
    const woolly_matmul_plan as_chosen = plan;
    /* copies, so that the two slots' kernels are told apart even where one kernel serves both */
    woolly_kernel small = *plan.step[WOOLLY_TOKENS_SMALL].kernel,
                  large = *plan.step[WOOLLY_TOKENS_LARGE].kernel;
    large.min_tokens = MIN;
    plan.step[WOOLLY_TOKENS_SMALL].kernel = &small;
    plan.step[WOOLLY_TOKENS_LARGE].kernel = &large;
    static float x[M * K], y[M * ROWS], want[M * ROWS];
    tu_rng rng = {17};
    for (int i = 0; i < M * K; i++)
        x[i] = tu_rand_normal(&rng);
    woolly_threadpool *two = woolly_threadpool_open(2, &err);
    cr_assert(two, "%s", err.msg);
    static const int MS[] = {2, 16, 17, MIN - 1, MIN, M};
    for (size_t i = 0; i < sizeof MS / sizeof MS[0]; i++) {
        const int m = MS[i];
        const enum woolly_tokens_class want_cls =
            m <= 16 || m < MIN ? WOOLLY_TOKENS_SMALL : WOOLLY_TOKENS_LARGE;
        cr_expect_eq(woolly_matmul_plan_class(&plan, m), want_cls, "m %d: class %d", m,
                     (int)woolly_matmul_plan_class(&plan, m));
        woolly_matmul(two, &as_chosen, &w, x, m, want, ROWS, NULL);
        atomic_store(&g_seen_kernel, NULL);
        atomic_store(&g_seen_other, 0);
        memset(y, 0xFF, sizeof y);
        woolly_matmul_set_observer(observe_kernel);
        woolly_matmul(two, &plan, &w, x, m, y, ROWS, NULL);
        woolly_matmul_set_observer(NULL);
        cr_expect_eq(atomic_load(&g_seen_kernel), want_cls == WOOLLY_TOKENS_SMALL ? &small : &large,
                     "m %d: ran the other slot's kernel", m);
        cr_expect_eq(atomic_load(&g_seen_other), 0, "m %d: ran both slots' kernels", m);
        for (int t = 0; t < m * ROWS; t++) /* the same arithmetic where one kernel serves both slots */
            if (small.matmul == large.matmul)
                cr_assert(y[t] == want[t], "m %d: output %d differs", m, t);
            else
                cr_assert(fabsf(y[t] - want[t]) <= 1e-3f * (1.0f + fabsf(want[t])), "m %d: output %d", m, t);
    }
    large.min_tokens = 0; /* none: 17 tokens are the 17+ step's */
    cr_expect_eq(woolly_matmul_plan_class(&plan, 17), WOOLLY_TOKENS_LARGE);
    cr_expect_eq(woolly_matmul_plan_class(&plan, 1), WOOLLY_TOKENS_1);
    woolly_threadpool_close(two);
    free(wdata);
    free(deq);
}

/* Several matrices reading one input in one call, and the plan's blocking (rows, tokens and columns per
 * kernel call), give what one call per matrix over all rows gives; with int8 activations, packed once. */
Test(matmul, several_outputs_and_blocking_keep_the_result)
{
    enum { K = 1024, M = 6, N = 3 };
    static const int64_t ROWS[N] = {40, 17, 33};
    float *deq[N];
    void *data[N];
    woolly_matrix w[N];
    woolly_matmul_plan plan[N];
    woolly_error err = {{0}};
    static float x[M * K], y[N][M * 40], want[N][M * 40];
    tu_rng rng = {3};
    for (int i = 0; i < M * K; i++)
        x[i] = tu_rand_normal(&rng);
    static uint8_t pack[M * K / 32 * sizeof(woolly_block_q8x32)];
    for (int act = WOOLLY_ACT_F32; act <= WOOLLY_ACT_Q8; act += WOOLLY_ACT_Q8 - WOOLLY_ACT_F32) {
        for (int i = 0; i < N; i++) {
            data[i] = random_q4k(ROWS[i], K, &deq[i]);
            w[i] = woolly_matrix_rows(data[i], WOOLLY_TYPE_Q4_K, ROWS[i], K, "w");
            w[i].act = (enum woolly_act)act;
            cr_assert_eq(woolly_matmul_plan_init(&plan[i], &w[i], NULL, &err), 0, "%s", err.msg);
        }
        for (int m = 1; m <= M; m += M - 1) {
            woolly_threadpool *one = woolly_threadpool_open(1, &err),
                              *three = woolly_threadpool_open(3, &err);
            cr_assert(one && three, "%s", err.msg);
            woolly_matmul_out outs[N];
            for (int i = 0; i < N; i++) {
                woolly_matmul(one, &plan[i], &w[i], x, m, want[i], (size_t)ROWS[i], pack);
                outs[i] = (woolly_matmul_out){&w[i], &plan[i], y[i], (size_t)ROWS[i]};
            }
            memset(y, 0xFF, sizeof y);
            woolly_matmul_n(three, outs, N, x, m, pack);
            for (int i = 0; i < N; i++)
                cr_expect(memcmp(y[i], want[i], sizeof(float) * (size_t)(m * ROWS[i])) == 0,
                          "act %d m %d: output %d of one call over 3 threads differs", act, m, i);
            const enum woolly_tokens_class cls = woolly_tokens_class_of(m);
            for (int i = 0; i < N; i++) {
                plan[i].step[cls].rows_per_call = 8;
                plan[i].step[cls].tokens_per_call = m > 1 ? 4 : 0;
                plan[i].step[cls].k_per_call = 256;
                plan[i].step[cls].prefetch = 256;
                plan[i].step[cls].threads = 2;
            }
            memset(y, 0xFF, sizeof y);
            woolly_matmul_n(three, outs, N, x, m, pack);
            for (int i = 0; i < N; i++) {
                const double e = tu_nmse(y[i], want[i], (size_t)(m * ROWS[i]));
                cr_expect_leq(e, 1e-12, "act %d m %d: output %d blocked differs by NMSE %g", act, m, i, e);
                plan[i].step[cls] = (woolly_matmul_step){.kernel = plan[i].step[cls].kernel};
            }
            woolly_threadpool_close(one);
            woolly_threadpool_close(three);
        }
        for (int i = 0; i < N; i++)
            free(data[i]), free(deq[i]);
    }
}

Test(matmul, a_slot_without_kernels_is_an_error)
{
    woolly_matmul_plan plan;
    woolly_error err = {{0}};
    static const uint8_t data[36 * 4];
    const woolly_matrix w = woolly_matrix_rows(data, WOOLLY_TYPE_Q8_1, 4, 32, "w");
    cr_expect_eq(woolly_matmul_plan_init(&plan, &w, NULL, &err), -1);
    cr_expect(strstr(err.msg, "Q8_1") != NULL, "%s", err.msg);
}

Test(matmul, activation_packers)
{
    enum { K = 64, M = 2 };
    static float x[M * K];
    tu_rng rng = {5};
    for (int i = 0; i < M * K; i++)
        x[i] = 3.0f * tu_rand_normal(&rng);
    x[5] = 0.0f;
    for (int i = 32; i < 64; i++)
        x[i] = 0.0f; /* an all-zero block: scale 0, no division by zero */

    cr_expect_eq(woolly_act_row_bytes(WOOLLY_ACT_F32, K), K * 4);
    cr_expect_eq(woolly_act_row_bytes(WOOLLY_ACT_F16, K), K * 2);
    cr_expect_eq(woolly_act_row_bytes(WOOLLY_ACT_Q8, K), 2 * sizeof(woolly_block_q8x32));
    cr_expect_eq(woolly_act_row_bytes(WOOLLY_ACT_Q8, 48), 0, "Q8 rows are whole blocks of 32");

    uint16_t h[M * K];
    woolly_act_pack(WOOLLY_ACT_F16, x, K, 0, M, K, h, K * 2);
    for (int i = 0; i < M * K; i++)
        cr_assert_eq(h[i], woolly_f32_to_f16(x[i]));

    woolly_block_q8x32 q[M * K / 32];
    woolly_act_pack(WOOLLY_ACT_Q8, x, K, 0, M, K, q, woolly_act_row_bytes(WOOLLY_ACT_Q8, K));
    for (int b = 0; b < M * K / 32; b++) {
        float amax = 0;
        int sum[2] = {0, 0};
        for (int i = 0; i < 32; i++) {
            amax = fmaxf(amax, fabsf(x[b * 32 + i]));
            sum[i / 16] += q[b].q[i];
            cr_assert_leq(fabsf(x[b * 32 + i] - q[b].d * q[b].q[i]), 0.5001f * q[b].d + 1e-30f,
                          "block %d value %d: %g packed as %d x %g", b, i, x[b * 32 + i], q[b].q[i], q[b].d);
        }
        cr_expect_float_eq(q[b].d, amax / 127.0f, 1e-6f * amax + 1e-30f);
        cr_expect_eq(q[b].off[0], -32 * sum[0]);
        cr_expect_eq(q[b].off[1], -32 * sum[1]);
        cr_expect_float_eq(q[b].ds, q[b].d * (float)(sum[0] + sum[1]), 1e-5f * fabsf(q[b].ds) + 1e-30f);
    }
    cr_expect_eq(q[1].d, 0.0f);

    float f[M * K];
    woolly_act_pack(WOOLLY_ACT_F32, x, K, 0, M, K, f, K * 4);
    cr_expect(memcmp(f, x, sizeof f) == 0);
}
