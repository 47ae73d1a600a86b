/* The attention work split the forward pass runs and the tuner measures (runtime/model/attn_run.c),
 * on its own: a batch of several runs of different sequences, and one token split into KV chunks (one of
 * them empty), at 1 to 3 threads and several queries per call, against attention computed in double
 * precision from the values stored in the cache, so that an item the split skips, runs twice or gives the
 * wrong rows shows; and the rule for the number of KV chunks. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "attn_run.h"
#include "kernel_check.h"
#include "testutil.h"

/* Float kernels against a double-precision sum over at most N_CTX positions of values of size ~1. */
#define ATTN_RUN_MAX_ERR 1e-4

enum { N_HEAD = 4, N_HEAD_KV = 2, HEAD_DIM = 64, N_SEQ = 3, N_CTX = 704, MAX_ROWS = 64 };
enum { Q_DIM = N_HEAD * HEAD_DIM, KV_DIM = N_HEAD_KV * HEAD_DIM };

typedef struct fixture {
    woolly_kv_cache kv;
    float *k, *v; /* [N_SEQ][N_CTX][KV_DIM] what the cache holds (F32: exactly) */
    float q[MAX_ROWS * Q_DIM], out[MAX_ROWS * Q_DIM];
    float part[WOOLLY_ATTN_MAX_PARTS * Q_DIM], ml[WOOLLY_ATTN_MAX_PARTS * N_HEAD * 2];
} fixture;

static fixture *fixture_open(void)
{
    fixture *f = calloc(1, sizeof *f);
    cr_assert(f != NULL);
    woolly_error err;
    cr_assert_eq(woolly_kv_cache_open(&f->kv, WOOLLY_TYPE_F32, N_CTX, N_SEQ, 1, N_HEAD_KV, HEAD_DIM, &err), 0,
                 "%s", err.msg);
    const size_t n = (size_t)N_SEQ * N_CTX * KV_DIM;
    f->k = malloc(sizeof(float) * n);
    f->v = malloc(sizeof(float) * n);
    cr_assert(f->k && f->v);
    tu_rng r = {0x5EED};
    for (size_t i = 0; i < n; i++)
        f->k[i] = tu_rand_normal(&r), f->v[i] = tu_rand_normal(&r);
    for (int s = 0; s < N_SEQ; s++)
        for (int p = 0; p < N_CTX; p++) {
            const size_t at = ((size_t)s * N_CTX + p) * KV_DIM;
            woolly_kv_cache_store(&f->kv, 0, s, p, f->k + at, f->v + at);
        }
    for (int i = 0; i < MAX_ROWS * Q_DIM; i++)
        f->q[i] = tu_rand_normal(&r);
    return f;
}

static void fixture_close(fixture *f)
{
    woolly_kv_cache_close(&f->kv);
    free(f->k), free(f->v), free(f);
}

/* The largest difference between a's output rows and attention in double precision. */
static double max_error(const fixture *f, const woolly_attn_layer *a)
{
    double worst = 0.0;
    for (int32_t r = 0; r < a->n_runs; r++)
        for (int32_t t = 0; t < a->runs[r].n; t++) {
            const int32_t row = a->runs[r].row0 + t, pos = a->runs[r].pos0 + t, seq = a->runs[r].seq;
            for (int h = 0; h < N_HEAD; h++) {
                const int hk = h / (N_HEAD / N_HEAD_KV);
                const float *q = f->q + (size_t)row * Q_DIM + h * HEAD_DIM;
                double s[N_CTX], m = -INFINITY, l = 0.0, o[HEAD_DIM] = {0};
                const int first = a->window > 0 && pos + 1 > a->window ? pos + 1 - a->window : 0;
                for (int p = first; p <= pos; p++) {
                    const float *k = f->k + ((size_t)seq * N_CTX + p) * KV_DIM + hk * HEAD_DIM;
                    s[p] = 0.0;
                    for (int d = 0; d < HEAD_DIM; d++)
                        s[p] += (double)q[d] * k[d];
                    s[p] *= a->scale;
                    m = s[p] > m ? s[p] : m;
                }
                for (int p = first; p <= pos; p++) {
                    const float *v = f->v + ((size_t)seq * N_CTX + p) * KV_DIM + hk * HEAD_DIM;
                    const double w = exp(s[p] - m);
                    l += w;
                    for (int d = 0; d < HEAD_DIM; d++)
                        o[d] += w * v[d];
                }
                const float *got = f->out + (size_t)row * Q_DIM + h * HEAD_DIM;
                for (int d = 0; d < HEAD_DIM; d++) {
                    const double e = isnan(got[d]) ? INFINITY : fabs(got[d] - o[d] / l);
                    worst = e > worst ? e : worst;
                }
            }
        }
    return worst;
}

static woolly_attn_layer layer(fixture *f, const woolly_seq_run *runs, int32_t n_runs)
{
    const woolly_kernel *k = woolly_kernel_choose_attn(WOOLLY_TYPE_F32, HEAD_DIM, WOOLLY_ACT_F32);
    cr_assert(k != NULL);
    return (woolly_attn_layer){.n_head = N_HEAD,
                               .n_head_kv = N_HEAD_KV,
                               .head_dim = HEAD_DIM,
                               .scale = 1.0f / sqrtf(HEAD_DIM),
                               .q = f->q,
                               .out = f->out,
                               .runs = runs,
                               .n_runs = n_runs,
                               .kv = &f->kv,
                               .layer = 0,
                               .kernel = k,
                               .kernel_decode = k,
                               .q_per_call = k->tile_m,
                               .n_split = 1,
                               .part = f->part,
                               .ml = f->ml};
}

/* Runs a on a pool of `threads`, every thread used, its output first filled with NaN. */
static void run(fixture *f, const woolly_attn_layer *a, int threads)
{
    woolly_error err;
    woolly_threadpool *pool = woolly_threadpool_open(threads, &err);
    cr_assert(pool != NULL, "%s", err.msg);
    for (int i = 0; i < MAX_ROWS * Q_DIM; i++)
        f->out[i] = NAN;
    woolly_attn_run(pool, a, threads);
    woolly_threadpool_close(pool);
}

Test(attn_run, batch_of_runs_covers_every_query_once)
{
    fixture *f = fixture_open();
    /* a prompt from position 0, a generated token deep in its cache, a continued prompt, a prompt's
     * token that comes alone */
    const woolly_seq_run runs[] = {{.row0 = 0, .n = 5, .seq = 0, .pos0 = 0},
                                   {.row0 = 5, .n = 1, .seq = 1, .pos0 = 600, .generated = true},
                                   {.row0 = 6, .n = 37, .seq = 2, .pos0 = 40},
                                   {.row0 = 43, .n = 1, .seq = 0, .pos0 = 300}};
    woolly_attn_layer a = layer(f, runs, 4);
    const int32_t q_per_call[] = {1, 4, 16};
    for (int threads = 1; threads <= 3; threads++)
        for (int i = 0; i < 3; i++) {
            a.q_per_call = q_per_call[i];
            run(f, &a, threads);
            const double e = max_error(f, &a);
            cr_expect_leq(e, ATTN_RUN_MAX_ERR, "%d threads, %d queries per call: error %.3g", threads,
                          q_per_call[i], e);
        }
    fixture_close(f);
}

static atomic_int g_calls_by[3];

static void observe_slow_thread0(const woolly_kernel *k, const woolly_attn_args *a, int ith, int nth)
{
    (void)k, (void)a, (void)nth;
    atomic_fetch_add(&g_calls_by[ith], 1);
    if (ith == 0) {
        const struct timespec slow = {0, 50 * 1000 * 1000};
        nanosleep(&slow, NULL);
    }
}

/* A thread slowed by something outside the job leaves the batch's last items to the others: the output
 * is still right (each item once), and the slow thread runs only items of its own stretch, fewer than
 * an equal split would give it. */
Test(attn_run, a_slow_thread_leaves_the_shared_items_to_the_others)
{
    fixture *f = fixture_open();
    /* 8 sequences' next tokens at about the same depth, as a server step has them: 16 items of equal
     * cost, of which thread 0's own stretch is 4 */
    woolly_seq_run runs[8];
    for (int32_t r = 0; r < 8; r++)
        runs[r] = (woolly_seq_run){.row0 = r, .n = 1, .seq = r % N_SEQ, .pos0 = 600 + r, .generated = true};
    woolly_attn_layer a = layer(f, runs, 8);
    for (int t = 0; t < 3; t++)
        atomic_init(&g_calls_by[t], 0);
    woolly_attn_set_observer(observe_slow_thread0);
    run(f, &a, 3);
    woolly_attn_set_observer(NULL);
    const double e = max_error(f, &a);
    cr_expect_leq(e, ATTN_RUN_MAX_ERR, "3 threads, one slow: error %.3g", e);
    const int calls = atomic_load(&g_calls_by[0]) + atomic_load(&g_calls_by[1]) + atomic_load(&g_calls_by[2]);
    cr_expect_eq(calls, 8 * N_HEAD_KV, "%d kernel calls for %d items", calls, 8 * N_HEAD_KV);
    cr_expect_leq(atomic_load(&g_calls_by[0]), 4, "the slow thread ran %d of 16 items, more than its own 4",
                  atomic_load(&g_calls_by[0]));
    fixture_close(f);
}

Test(attn_run, split_token_matches_whole)
{
    fixture *f = fixture_open();
    /* deep in the cache; and at position 1, where 3 chunks of 2 positions leave one empty */
    const int32_t pos[] = {700, 1};
    for (int i = 0; i < 2; i++) {
        const woolly_seq_run one = {.row0 = 0, .n = 1, .seq = 1, .pos0 = pos[i], .generated = true};
        woolly_attn_layer a = layer(f, &one, 1);
        for (int threads = 1; threads <= 3; threads++)
            for (a.n_split = 1; a.n_split <= 5; a.n_split += 2) {
                run(f, &a, threads);
                const double e = max_error(f, &a);
                cr_expect_leq(e, ATTN_RUN_MAX_ERR, "position %d, %d threads, %d chunks: error %.3g", pos[i],
                              threads, a.n_split, e);
            }
    }
    fixture_close(f);
}

/* A sliding window over a ring cache (W - 1 + n_batch rows rounded up to 128: 128 here), each sequence
 * stored up to its run's last token as the forward pass has it, so that the ring has wrapped past the
 * positions before each window: a prompt's run across the ring's end, a generated token split into KV
 * chunks of its window only (chunks of 8 positions and fewer), a prompt from position 0. */
Test(attn_run, a_window_over_a_ring)
{
    enum { WINDOW = 40, BATCH = 48 };
    fixture *f = fixture_open();
    woolly_kv_cache ring;
    woolly_error err;
    const int32_t windows[] = {WINDOW};
    cr_assert_eq(woolly_kv_cache_open_swa(&ring, WOOLLY_TYPE_F32, N_CTX, N_SEQ, BATCH, 1, windows, N_HEAD_KV,
                                          HEAD_DIM, &err),
                 0, "%s", err.msg);
    cr_assert_eq(woolly_kv_cache_ring(&ring, 0), 128);
    const woolly_seq_run runs[] = {{.row0 = 0, .n = 37, .seq = 0, .pos0 = 490},
                                   {.row0 = 37, .n = 1, .seq = 1, .pos0 = 700, .generated = true},
                                   {.row0 = 38, .n = 20, .seq = 2, .pos0 = 0}};
    for (int r = 0; r < 3; r++)
        for (int p = 0; p < runs[r].pos0 + runs[r].n; p++) {
            const size_t at = ((size_t)runs[r].seq * N_CTX + p) * KV_DIM;
            woolly_kv_cache_store(&ring, 0, runs[r].seq, p, f->k + at, f->v + at);
        }
    woolly_attn_layer a = layer(f, runs, 3);
    a.kv = &ring;
    a.window = WINDOW;
    for (int threads = 1; threads <= 2; threads++) {
        run(f, &a, threads);
        const double e = max_error(f, &a);
        cr_expect_leq(e, ATTN_RUN_MAX_ERR, "%d threads: error %.3g", threads, e);
    }
    woolly_attn_layer one = layer(f, &runs[1], 1);
    one.kv = &ring;
    one.window = WINDOW;
    for (one.n_split = 1; one.n_split <= 5; one.n_split += 2) {
        run(f, &one, 2);
        const double e = max_error(f, &one);
        cr_expect_leq(e, ATTN_RUN_MAX_ERR, "%d chunks of the window: error %.3g", one.n_split, e);
    }
    woolly_kv_cache_close(&ring);
    fixture_close(f);
}

/* Tiles whose rounding their one-query path does not share, that run here: the BF16 tiles (avx512) or the
 * int16 ones (avx2); NULL on a CPU with neither. Not the FP16 tiles, whose decode sums P V in halves as
 * the tiles do, so that a token's output is the same on either path and this test could not tell the
 * paths apart. */
static const woolly_kernel *rounded_kernel(void)
{
    static const char *const names[] = {"attn_f16_flash_avx512_d64_b32x64_bf16",
                                        "attn_f16_flash_avx2_d64_b32x64_i16"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const woolly_kernel *k = woolly_kernel_by_name(names[i]);
        if (k && woolly_kernel_runs(k))
            return k;
    }
    return NULL;
}

/* A prompt's token that comes alone (a run of one, not generated) gets the numbers of its row in the
 * whole prompt's run, where the tiles round their operands too; a generated token takes the one-query
 * path, whose numbers differ from rounded tiles' by their rounding (the check that the two runs did
 * take different paths). */
Test(attn_run, a_prompt_token_alone_takes_the_tiles)
{
    const woolly_kernel *k = rounded_kernel();
    cr_assert(k != NULL || woolly_isa_active() < WOOLLY_ISA_AVX2, "no rounded attention tiles run here");
    if (!k)
        k = woolly_kernel_choose_attn(WOOLLY_TYPE_F16, HEAD_DIM, WOOLLY_ACT_F32);
    enum { PROMPT = 40 };
    fixture *f = fixture_open();
    woolly_error err;
    woolly_kv_cache kv;
    cr_assert_eq(woolly_kv_cache_open(&kv, WOOLLY_TYPE_F16, N_CTX, 1, 1, N_HEAD_KV, HEAD_DIM, &err), 0, "%s",
                 err.msg);
    for (int p = 0; p < PROMPT; p++)
        woolly_kv_cache_store(&kv, 0, 0, p, f->k + (size_t)p * KV_DIM, f->v + (size_t)p * KV_DIM);
    static float whole[MAX_ROWS * Q_DIM];
    const woolly_seq_run prompt = {.row0 = 0, .n = PROMPT, .seq = 0, .pos0 = 0};
    woolly_attn_layer a = layer(f, &prompt, 1);
    a.kv = &kv;
    a.kernel = a.kernel_decode = k;
    a.q_per_call = k->tile_m;
    run(f, &a, 2);
    memcpy(whole, f->out, sizeof whole);

    for (int generated = 0; generated < 2; generated++) {
        const woolly_seq_run last = {
            .row0 = PROMPT - 1, .n = 1, .seq = 0, .pos0 = PROMPT - 1, .generated = generated};
        a.runs = &last;
        run(f, &a, 2);
        const double e = tu_nmse(f->out + (PROMPT - 1) * Q_DIM, whole + (PROMPT - 1) * Q_DIM, Q_DIM);
        if (!generated)
            cr_expect_leq(e, KC_ATTN_ALONE_MAX_NMSE, "%s: the prompt's last token alone: NMSE %.3g", k->name,
                          e);
        else if (k->act != WOOLLY_ACT_F32)
            cr_expect_gt(e, KC_ATTN_ALONE_MAX_NMSE, "%s: a generated token on the tiles too (NMSE %.3g)",
                         k->name, e);
    }
    woolly_kv_cache_close(&kv);
    fixture_close(f);
}

Test(attn_run, kv_split_rule)
{
    /* without a profile: the fewest chunks that make n_head_kv * chunks a multiple of the threads */
    for (int32_t kv_heads = 1; kv_heads <= 8; kv_heads++)
        for (int nth = 1; nth <= 16; nth++) {
            const int32_t s = woolly_attn_kv_split(kv_heads, nth, 1 << 20, 0, WOOLLY_ATTN_MAX_PARTS);
            cr_expect_eq(kv_heads * s % nth, 0, "%d KV heads, %d threads: %d chunks", kv_heads, nth, s);
            for (int32_t fewer = 1; fewer < s; fewer++)
                cr_expect_neq(kv_heads * fewer % nth, 0, "%d KV heads, %d threads: %d chunks would do",
                              kv_heads, nth, fewer);
        }
    /* a short cache keeps chunks of at least 256 positions; a chosen split likewise; max_parts caps */
    cr_expect_eq(woolly_attn_kv_split(1, 4, 600, 0, WOOLLY_ATTN_MAX_PARTS), 2);
    cr_expect_eq(woolly_attn_kv_split(1, 4, 255, 0, WOOLLY_ATTN_MAX_PARTS), 1);
    cr_expect_eq(woolly_attn_kv_split(4, 2, 4096, 8, WOOLLY_ATTN_MAX_PARTS), 8);
    cr_expect_eq(woolly_attn_kv_split(4, 2, 1000, 8, WOOLLY_ATTN_MAX_PARTS), 3);
    cr_expect_eq(woolly_attn_kv_split(1, 16, 1 << 20, 0, 4), 4);
}
