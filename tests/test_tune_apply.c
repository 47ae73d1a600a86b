/* Every tuned parameter reaches the kernel: a model opened with a profile runs, for one tensor and each
 * batch-size class, the kernel the profile names, with the blocking it sets (rows, columns and tokens
 * per call, prefetch distance, threads), as observed at each kernel call; and for attention, the decode
 * kernel over a long cache split into the profile's chunks, the prefill kernel with its queries per
 * call; a second profile with other values changes every one of them. The logits with either profile, and
 * without one, agree with the float64 reference within the model tests' bar. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "matmul.h"
#include "model_logits_check.h"
#include "profile_check.h"
#include "testutil.h"

/* blk.0.ffn_down of tiny-llama-q4_k_m: Q4_K, 256 rows of 768 (the only Q4_K matrix of that shape). */
#define ROWS 256
#define COLS 768
#define THREADS 2

typedef struct seen {
    char kernel[64];
    bool one_kernel; /* every call ran the same kernel */
    int32_t max_rows, max_k, max_m, prefetch, nth;
    bool one_prefetch, one_nth;
    int calls, accumulating;
} seen;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static seen g_seen[WOOLLY_TOKENS_CLASSES];
static int g_class = -1; /* the class the test is evaluating */

static void observe(const woolly_matrix *w, const woolly_kernel *k, const woolly_matmul_args *a, int ith,
                    int nth)
{
    (void)ith;
    if (w->type != WOOLLY_TYPE_Q4_K || w->rows != ROWS || w->cols != COLS || g_class < 0)
        return;
    pthread_mutex_lock(&g_lock);
    seen *s = &g_seen[g_class];
    if (!s->calls) {
        snprintf(s->kernel, sizeof s->kernel, "%s", k->name);
        s->one_kernel = s->one_prefetch = s->one_nth = true;
        s->prefetch = a->prefetch;
        s->nth = nth;
    }
    s->one_kernel &= !strcmp(s->kernel, k->name);
    s->one_prefetch &= s->prefetch == a->prefetch;
    s->one_nth &= s->nth == nth;
    const int32_t rows = (int32_t)(a->r1 - a->r0);
    s->max_rows = rows > s->max_rows ? rows : s->max_rows;
    s->max_k = a->k > s->max_k ? (int32_t)a->k : s->max_k;
    s->max_m = a->m > s->max_m ? (int32_t)a->m : s->max_m;
    s->calls++;
    s->accumulating += a->accumulate != 0;
    pthread_mutex_unlock(&g_lock);
}

/* Tokens evaluated per class: 1, a small batch, a large one. */
static const int BATCH[WOOLLY_TOKENS_CLASSES] = {1, 8, 48};

/* Runs the model with the profile at `path` on one batch of each class and records the calls. */
static void observe_run(const char *path)
{
    setenv("WOOLLY_TUNE_PROFILE", path, 1);
    woolly_model *m = woolly_model_open(model_path("tiny-llama-q4_k_m"));
    cr_assert(m != NULL, "%s", woolly_last_error());
    cr_assert_str_eq(woolly_model_tune_profile(m), path, "the model does not run with the profile");
    woolly_context_params cp = woolly_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = THREADS;
    woolly_context *c = woolly_context_open(m, &cp);
    cr_assert(c != NULL, "%s", woolly_last_error());
    cr_expect_eq(woolly_context_n_tuned(c), WOOLLY_TOKENS_CLASSES + WOOLLY_ATTN_PHASES,
                 "one tensor, three classes, and attention's two phases tuned");
    memset(g_seen, 0, sizeof g_seen);
    woolly_matmul_set_observer(observe);
    woolly_token ids[48];
    for (int i = 0; i < 48; i++)
        ids[i] = 100 + 37 * i;
    for (int k = 0; k < WOOLLY_TOKENS_CLASSES; k++) {
        g_class = k;
        cr_assert_eq(woolly_eval(c, ids, BATCH[k]), 0, "%s", woolly_last_error());
    }
    g_class = -1;
    woolly_matmul_set_observer(NULL);
    woolly_context_close(c);
    woolly_model_close(m);
    unsetenv("WOOLLY_TUNE_PROFILE");
}

/* What the calls of each class received, against the profile's steps. */
static void expect_steps(const woolly_matmul_step *steps, const char *which)
{
    for (int k = 0; k < WOOLLY_TOKENS_CLASSES; k++) {
        const seen *s = &g_seen[k];
        const woolly_matmul_step *st = &steps[k];
        const char *cls = woolly_tokens_class_name((enum woolly_tokens_class)k);
        cr_assert(s->calls > 0, "%s, %s tokens: no kernel call observed", which, cls);
        cr_expect(s->one_kernel && !strcmp(s->kernel, st->kernel->name),
                  "%s, %s tokens: ran %s, the profile names %s", which, cls, s->kernel, st->kernel->name);
        cr_expect(s->one_prefetch && s->prefetch == st->prefetch,
                  "%s, %s tokens: prefetch %d, the profile says %d", which, cls, s->prefetch, st->prefetch);
        cr_expect(s->one_nth && s->nth == st->threads,
                  "%s, %s tokens: %d threads, the profile splits over %d", which, cls, s->nth, st->threads);
        cr_expect_eq(s->max_rows, st->rows_per_call,
                     "%s, %s tokens: calls of up to %d rows, the profile says %d", which, cls, s->max_rows,
                     st->rows_per_call);
        cr_expect_eq(s->max_k, st->k_per_call,
                     "%s, %s tokens: calls of up to %d columns, the profile says %d", which, cls, s->max_k,
                     st->k_per_call);
        cr_expect(s->accumulating > 0, "%s, %s tokens: no call accumulated the next block of columns", which,
                  cls);
        const int32_t want_m = k == WOOLLY_TOKENS_1 ? 1 : st->tokens_per_call;
        cr_expect_eq(s->max_m, want_m, "%s, %s tokens: calls of up to %d tokens, the profile says %d", which,
                     cls, s->max_m, want_m);
    }
}

/* Attention of tiny-llama (F16 cache, head dimension 64) as profiles A and B set it: every value differs
 * between them and from the defaults (the default kernel is the ISA level's; these are the scalar
 * ones every build has). */
typedef struct attn_choice {
    const char *decode, *prefill;
    int32_t split, queries_per_call;
} attn_choice;
static const attn_choice ATTN_A = {"attn_f16_flash_scalar_any", "attn_f16_flash_scalar_d64_b8x64", 2, 8};
static const attn_choice ATTN_B = {"attn_f16_flash_scalar_d64_b8x64", "attn_f16_flash_scalar_any", 3, 16};

/* A profile with one layout row for the tensor's shape and one step per class, and attention's rows. */
static void save_profile(const char *path, const woolly_layout *layout, const woolly_matmul_step *steps,
                         const attn_choice *attn)
{
    woolly_profile *p = pc_new();
    pc_layout(p, WOOLLY_TYPE_Q4_K, ROWS, COLS, layout);
    for (int k = 0; k < WOOLLY_TOKENS_CLASSES; k++)
        pc_matmul(p, WOOLLY_TYPE_Q4_K, ROWS, COLS, (enum woolly_tokens_class)k, THREADS, steps[k]);
    pc_attn(p, WOOLLY_TYPE_F16, 64, WOOLLY_ATTN_DECODE, THREADS, attn->decode, 1, attn->split);
    pc_attn(p, WOOLLY_TYPE_F16, 64, WOOLLY_ATTN_PREFILL, THREADS, attn->prefill, attn->queries_per_call, 1);
    char *text = pc_text(p, NULL);
    pc_save_text(path, text);
    free(text);
    woolly_profile_free(p);
}

/* Profile A: GGUF rows and the scalar reference kernels, which every build has. Profile B: this CPU's
 * default layout and kernels where they are another layout, else other scalar kernels; every value
 * differs from A's. */
static void profiles(const woolly_layout **la, woolly_matmul_step *a, const woolly_layout **lb,
                     woolly_matmul_step *b)
{
    *la = NULL;
    a[0] = (woolly_matmul_step){pc_kernel("q4k_f16_gemv_scalar_1x1"), 48, 0, 256, 64, 1};
    a[1] = (woolly_matmul_step){pc_kernel("q4k_q8_gemm_scalar_4x1"), 16, 4, 512, 128, 2};
    a[2] = (woolly_matmul_step){pc_kernel("q4k_f32_gemm_scalar_4x1"), 64, 8, 256, 32, 2};
    enum woolly_act act;
    woolly_error err = {{0}};
    cr_assert_eq(woolly_matmul_default_format(WOOLLY_TYPE_Q4_K, COLS, WOOLLY_ACT_MASK_ALL, &act, lb, &err), 0,
                 "%s", err.msg);
    const woolly_kernel *kb[WOOLLY_TOKENS_CLASSES];
    if (*lb) {
        for (int k = 0; k < WOOLLY_TOKENS_CLASSES; k++)
            kb[k] = woolly_matmul_default_kernel((enum woolly_tokens_class)k, WOOLLY_TYPE_Q4_K, act, *lb);
    } else {
        kb[0] = pc_kernel("q4k_q8_gemv_scalar_1x1");
        kb[1] = pc_kernel("q4k_f16_gemm_scalar_4x1");
        kb[2] = pc_kernel("q4k_q8_gemm_scalar_4x1");
    }
    /* calls of up to 4 tiles, within a thread's share of the rows so that the calls show it */
    const int32_t share = ROWS / THREADS / kb[0]->tile_n * kb[0]->tile_n;
    cr_assert(share > 0, "%s: a %d-row tile is more than a thread's share of %d rows", kb[0]->name,
              kb[0]->tile_n, ROWS);
    b[0] = (woolly_matmul_step){kb[0], 4 * kb[0]->tile_n < share ? 4 * kb[0]->tile_n : share, 0, 512, 256, 2};
    /* the most whole tiles a small batch holds, so that the blocking shows in its calls */
    cr_assert(kb[1] && kb[1]->tile_m <= BATCH[1], "a %d-token batch is smaller than one tile", BATCH[1]);
    b[1] =
        (woolly_matmul_step){kb[1], 8 * kb[1]->tile_n, BATCH[1] / kb[1]->tile_m * kb[1]->tile_m, 256, 512, 1};
    /* up to 4 whole tiles, fewer tokens than the large batch so that the blocking shows */
    int32_t large = 4 * kb[2]->tile_m;
    while (large >= BATCH[2])
        large -= kb[2]->tile_m;
    cr_assert(large > 0, "a %d-token batch is not more than one %d-token tile", BATCH[2], kb[2]->tile_m);
    b[2] = (woolly_matmul_step){kb[2], 2 * kb[2]->tile_n, large, 512, 1024, 1};
    for (int k = 0; k < WOOLLY_TOKENS_CLASSES; k++) {
        if (b[k].rows_per_call == a[k].rows_per_call)
            b[k].rows_per_call *= 2;
        if (b[k].tokens_per_call == a[k].tokens_per_call && k)
            b[k].tokens_per_call *= 4;
        cr_assert(b[k].kernel && b[k].kernel != a[k].kernel, "class %d: profile B needs another kernel", k);
    }
}

Test(tune_apply, every_tuned_parameter_reaches_the_kernel_call)
{
    const woolly_layout *la, *lb;
    woolly_matmul_step a[WOOLLY_TOKENS_CLASSES], b[WOOLLY_TOKENS_CLASSES];
    profiles(&la, a, &lb, b);
    char pa[4096], pb[4096];
    snprintf(pa, sizeof pa, "%s", tu_tmp_path("a.profile"));
    snprintf(pb, sizeof pb, "%s", tu_tmp_path("b.profile"));
    save_profile(pa, la, a, &ATTN_A);
    save_profile(pb, lb, b, &ATTN_B);

    observe_run(pa);
    expect_steps(a, "profile A");
    seen first[WOOLLY_TOKENS_CLASSES];
    memcpy(first, g_seen, sizeof first);
    observe_run(pb);
    expect_steps(b, "profile B");
    for (int k = 0; k < WOOLLY_TOKENS_CLASSES; k++) { /* and so every value changed between the two runs */
        const seen *x = &first[k], *y = &g_seen[k];
        cr_expect(strcmp(x->kernel, y->kernel) && x->prefetch != y->prefetch && x->nth != y->nth &&
                      x->max_rows != y->max_rows && x->max_k != y->max_k && (k == 0 || x->max_m != y->max_m),
                  "class %d: the second profile did not change every argument", k);
    }
    remove(pa);
    remove(pb);
}

Test(tune_apply, logits_with_and_without_a_profile_agree_within_the_bar)
{
    const model_case *mc = &MODELS[1]; /* tiny-llama-q4_k_m */
    cr_assert_str_eq(mc->name, "tiny-llama-q4_k_m");
    const woolly_layout *la, *lb;
    woolly_matmul_step a[WOOLLY_TOKENS_CLASSES], b[WOOLLY_TOKENS_CLASSES];
    profiles(&la, a, &lb, b);
    char pa[4096], pb[4096];
    snprintf(pa, sizeof pa, "%s", tu_tmp_path("a.profile"));
    snprintf(pb, sizeof pb, "%s", tu_tmp_path("b.profile"));
    save_profile(pa, la, a, &ATTN_A);
    save_profile(pb, lb, b, &ATTN_B);
    ref r = load_ref(mc->name);
    const char *paths[] = {"none", pa, pb};
    /* batches of 20 (a large batch, then a small one) and of 1: every class runs */
    static const int BATCHES[2] = {20, 1};
    float *x[3][2];
    for (int i = 0; i < 3; i++) {
        setenv("WOOLLY_TUNE_PROFILE", paths[i], 1);
        woolly_model *m = woolly_model_open(model_path(mc->name));
        cr_assert(m != NULL, "%s", woolly_last_error());
        cr_assert(i == 0 ? woolly_model_tune_profile(m) == NULL : woolly_model_tune_profile(m) != NULL);
        for (int j = 0; j < 2; j++) {
            x[i][j] = api_logits(m, &r, BATCHES[j], THREADS, r.n_tokens);
            const double e = mean_nmse(x[i][j], r.logits, r.n_tokens, r.n_vocab);
            fprintf(stderr, "NMSE %s, profile %s, batch %d: %.3g (bar %.2g)\n", mc->name, paths[i],
                    BATCHES[j], e, mc->max_nmse);
            cr_expect_leq(e, mc->max_nmse,
                          "profile %s, batch %d: NMSE %.3g against the reference exceeds %.2g", paths[i],
                          BATCHES[j], e, mc->max_nmse);
            if (i) {
                const double d = mean_nmse(x[i][j], x[0][j], r.n_tokens, r.n_vocab);
                cr_expect_leq(d, mc->max_nmse,
                              "profile %s, batch %d: NMSE %.3g against the defaults exceeds %.2g", paths[i],
                              BATCHES[j], d, mc->max_nmse);
            }
        }
        woolly_model_close(m);
    }
    unsetenv("WOOLLY_TUNE_PROFILE");
    for (int i = 0; i < 3; i++)
        free(x[i][0]), free(x[i][1]);
    free_ref(&r);
    remove(pa);
    remove(pb);
}

/* ---- attention ---------------------------------------------------------------------------------- */

typedef struct attn_seen {
    char kernel[64];
    bool one_kernel;
    int calls;
    int32_t max_q;  /* queries per call */
    int64_t kv0[8]; /* the distinct first positions of the partial (split) calls */
    int n_kv0;
    bool one_query_each; /* decode: every call one query */
} attn_seen;

static attn_seen g_attn[WOOLLY_ATTN_PHASES];
static int g_phase = -1;

static void observe_attn(const woolly_kernel *k, const woolly_attn_args *a, int ith, int nth)
{
    (void)ith, (void)nth;
    if (g_phase < 0)
        return;
    pthread_mutex_lock(&g_lock);
    attn_seen *s = &g_attn[g_phase];
    if (!s->calls) {
        snprintf(s->kernel, sizeof s->kernel, "%s", k->name);
        s->one_kernel = s->one_query_each = true;
    }
    s->one_kernel &= !strcmp(s->kernel, k->name);
    s->one_query_each &= a->n_q == 1;
    s->max_q = (int32_t)a->n_q > s->max_q ? (int32_t)a->n_q : s->max_q;
    if (a->ml) {
        bool known = false;
        for (int i = 0; i < s->n_kv0; i++)
            known |= s->kv0[i] == a->kv0;
        if (!known && s->n_kv0 < 8)
            s->kv0[s->n_kv0++] = a->kv0;
    }
    s->calls++;
    pthread_mutex_unlock(&g_lock);
}

/* Cache positions filled before the observed token: long enough that a split of 3 stays whole
 * (attn_run.c keeps each chunk at least 256 positions long). */
#define LONG_CACHE 900

/* The observed prompt's length: longer than the default query tile (32 at AVX-512), so that calls show it. */
#define PROMPT 40

/* Runs tiny-llama with the profile at `path`: a prompt of PROMPT tokens (prefill, observed), the cache
 * filled to LONG_CACHE, then one token (decode, observed). */
static void observe_attn_run(const char *path)
{
    setenv("WOOLLY_TUNE_PROFILE", path, 1);
    woolly_model *m = woolly_model_open(model_path("tiny-llama-q4_k_m"));
    cr_assert(m != NULL, "%s", woolly_last_error());
    woolly_context_params cp = woolly_context_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = THREADS;
    woolly_context *c = woolly_context_open(m, &cp);
    cr_assert(c != NULL, "%s", woolly_last_error());
    woolly_token ids[LONG_CACHE];
    for (int i = 0; i < LONG_CACHE; i++)
        ids[i] = 100 + (37 * i) % 900;
    memset(g_attn, 0, sizeof g_attn);
    woolly_attn_set_observer(observe_attn);
    g_phase = WOOLLY_ATTN_PREFILL;
    cr_assert_eq(woolly_eval(c, ids, PROMPT), 0, "%s", woolly_last_error());
    g_phase = -1;
    for (int at = PROMPT; at < LONG_CACHE; at += 400) {
        const int n = LONG_CACHE - at < 400 ? LONG_CACHE - at : 400;
        cr_assert_eq(woolly_eval(c, ids + at, n), 0, "%s", woolly_last_error());
    }
    g_phase = WOOLLY_ATTN_DECODE;
    cr_assert_eq(woolly_eval(c, ids, 1), 0, "%s", woolly_last_error());
    g_phase = -1;
    woolly_attn_set_observer(NULL);
    woolly_context_close(c);
    woolly_model_close(m);
    unsetenv("WOOLLY_TUNE_PROFILE");
}

static void expect_attn(const attn_choice *want, const char *which)
{
    const attn_seen *d = &g_attn[WOOLLY_ATTN_DECODE], *p = &g_attn[WOOLLY_ATTN_PREFILL];
    cr_assert(d->calls > 0 && p->calls > 0, "%s: no attention call observed (decode %d, prefill %d)", which,
              d->calls, p->calls);
    cr_expect(d->one_kernel && !strcmp(d->kernel, want->decode), "%s, decode: ran %s, the profile names %s",
              which, d->kernel, want->decode);
    cr_expect(d->one_query_each, "%s, decode: a call with more than one query", which);
    cr_expect_eq(d->n_kv0, want->split, "%s, decode: the cache split into %d chunks, the profile says %d",
                 which, d->n_kv0, want->split);
    cr_expect(p->one_kernel && !strcmp(p->kernel, want->prefill), "%s, prefill: ran %s, the profile names %s",
              which, p->kernel, want->prefill);
    cr_expect_eq(p->max_q, want->queries_per_call,
                 "%s, prefill: calls of up to %d queries, the profile says %d", which, p->max_q,
                 want->queries_per_call);
    cr_expect_eq(p->n_kv0, 0, "%s, prefill: a split call", which);
}

Test(tune_apply, every_tuned_attention_parameter_reaches_the_kernel_call)
{
    const woolly_layout *la, *lb;
    woolly_matmul_step a[WOOLLY_TOKENS_CLASSES], b[WOOLLY_TOKENS_CLASSES];
    profiles(&la, a, &lb, b);
    char pa[4096], pb[4096];
    snprintf(pa, sizeof pa, "%s", tu_tmp_path("attn-a.profile"));
    snprintf(pb, sizeof pb, "%s", tu_tmp_path("attn-b.profile"));
    save_profile(pa, la, a, &ATTN_A);
    save_profile(pb, lb, b, &ATTN_B);

    /* without a profile: the default kernel for both, its query tile per call, no split at 2 threads
     * (tiny-llama's 2 KV heads share the threads evenly) */
    observe_attn_run("none");
    const woolly_kernel *def = woolly_kernel_choose_attn(WOOLLY_TYPE_F16, 64, WOOLLY_ACT_BF16); /* int8 matmuls */
    cr_assert(def != NULL);
    const attn_choice defaults = {def->name, def->name, 0, def->tile_m < PROMPT ? def->tile_m : PROMPT};
    expect_attn(&defaults, "no profile");

    observe_attn_run(pa);
    expect_attn(&ATTN_A, "profile A");
    observe_attn_run(pb);
    expect_attn(&ATTN_B, "profile B");
    remove(pa);
    remove(pb);
}
