/* Multi-sequence batches (woolly_decode): several sequences in one forward pass give each sequence the
 * logits it gets alone; greedy text on stories260K (reference kernels, no tuning profile) is the same
 * alone and batched; a sequence that ends mid-batch frees its cache region at once; a sequence that
 * copies another's beginning goes on as if it had evaluated it; a prompt's last token that comes alone
 * gets the logits of the whole prompt; a prompt longer than one feed-forward pass gives the logits of
 * shorter batches; bad batches are clear errors that evaluate nothing. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_run.h"
#include "testutil.h"
#include "woolly.h"

/* Batched against alone, per logits row: the same kernels on the same rows, only the batch size (GEMM
 * instead of GEMV) and the threads' split differ, so far below the model tests' bars against float64
 * (THREADS_MAX_NMSE there). */
#define BATCH_MAX_NMSE 1e-7

static woolly_model *open_model(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "models/%s.gguf", name);
    woolly_model *m = woolly_model_open(tu_data(rel));
    cr_assert(m != NULL, "%s", woolly_last_error());
    return m;
}

static woolly_context *open_ctx(woolly_model *m, int n_ctx, int n_batch, int n_seq)
{
    woolly_context_params p = woolly_context_default_params();
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.n_threads = 2;
    p.n_seq_max = n_seq;
    woolly_context *c = woolly_context_open(m, &p);
    cr_assert(c != NULL, "%s", woolly_last_error());
    return c;
}

/* A sequence of the logits test: prompt = ids[first .. first + n_prompt), then teacher-forced decode
 * steps over the ids that follow, up to ids[first + n_total). */
typedef struct seq_case {
    int first, n_prompt, n_total;
} seq_case;

enum { N_SEQ = 3 };

/* Logits of sequence k alone, after its prompt and after each decode step: [n_total - n_prompt + 1]
 * rows of n_vocab. */
static float *alone(woolly_model *m, const int32_t *ids, const seq_case *sc, int n_vocab)
{
    woolly_context *c = open_ctx(m, 64, 64, 1);
    const int rows = sc->n_total - sc->n_prompt + 1;
    float *out = malloc(sizeof(float) * (size_t)rows * (size_t)n_vocab);
    cr_assert(out != NULL);
    cr_assert_eq(woolly_eval(c, ids + sc->first, sc->n_prompt), 0, "%s", woolly_last_error());
    memcpy(out, woolly_get_logits(c, -1), sizeof(float) * (size_t)n_vocab);
    for (int r = 1; r < rows; r++) {
        cr_assert_eq(woolly_eval(c, ids + sc->first + sc->n_prompt + r - 1, 1), 0, "%s", woolly_last_error());
        memcpy(out + (size_t)r * n_vocab, woolly_get_logits(c, -1), sizeof(float) * (size_t)n_vocab);
    }
    woolly_context_close(c);
    return out;
}

/* The three sequences' prompts in one batch (interleaved with a decode step of none: all prompts), then
 * decode steps in one batch each, every logits row equal to the sequence's alone, bit for bit (before
 * the gated activations went row by row, stories260K's feed-forward width of 172, not whole vectors, left
 * it 1e-12 apart). The prompts have different lengths, so the sequences sit at different positions; the
 * batch lists them in a different order from their ids. */
static void check_batched_equals_alone(const char *name)
{
    woolly_model *m = open_model(name);
    const int n_vocab = woolly_model_n_vocab(m);
    char rel[128];
    snprintf(rel, sizeof rel, "refs/%s.tokens.txt", name);
    char *txt = tu_read_file(tu_data(rel), NULL);
    int32_t *ids;
    const int n_ids = tu_parse_ids(txt, &ids);
    free(txt);
    const seq_case cases[N_SEQ] = {{0, 6, 12}, {0, 2, 9}, {3, 7, 12}};
    for (int k = 0; k < N_SEQ; k++)
        cr_assert_leq(cases[k].first + cases[k].n_total, n_ids, "%s: %d reference tokens", name, n_ids);
    float *ref[N_SEQ];
    for (int k = 0; k < N_SEQ; k++)
        ref[k] = alone(m, ids, &cases[k], n_vocab);

    woolly_context *c = open_ctx(m, 64, 64, N_SEQ);
    woolly_batch b;
    cr_assert_eq(woolly_batch_init(&b, 64), 0);
    const int order[N_SEQ] = {2, 0, 1};
    int at[N_SEQ], n_past[N_SEQ], logits_at[N_SEQ];
    for (int o = 0; o < N_SEQ; o++) {
        const int k = order[o];
        for (int i = 0; i < cases[k].n_prompt; i++)
            woolly_batch_add(&b, ids[cases[k].first + i], i, k, i == cases[k].n_prompt - 1);
        logits_at[k] = b.n_tokens - 1;
        n_past[k] = cases[k].n_prompt;
        at[k] = 0;
    }
    double worst = 0.0;
    for (int step = 0;; step++) {
        cr_assert_eq(woolly_decode(c, &b), 0, "%s: step %d: %s", name, step, woolly_last_error());
        b.n_tokens = 0;
        for (int o = 0; o < N_SEQ; o++) {
            const int k = order[(o + step) % N_SEQ]; /* the order changes every step */
            if (at[k] < 0)
                continue;
            cr_assert_eq(woolly_seq_n_past(c, k), n_past[k]);
            const float *got = woolly_get_logits(c, logits_at[k]);
            cr_assert(got != NULL, "%s", woolly_last_error());
            const double e = tu_nmse(got, ref[k] + (size_t)at[k] * n_vocab, (size_t)n_vocab);
            worst = e > worst ? e : worst;
            /* the same bits: the matmuls, the gated activations (woolly_gated_rows) and attention's paths
             * take a token's values the same way in any batch */
            cr_expect_eq(e, 0.0, "%s: sequence %d, row %d: NMSE %g batched vs alone", name, k, at[k], e);
            if (cases[k].n_prompt + at[k] == cases[k].n_total) {
                at[k] = -1; /* done */
                continue;
            }
            woolly_batch_add(&b, ids[cases[k].first + n_past[k]], n_past[k], k, true);
            logits_at[k] = b.n_tokens - 1;
            n_past[k]++;
            at[k]++;
        }
        if (b.n_tokens == 0)
            break;
    }
    fprintf(stderr, "NMSE %s batched vs alone: max %.3g\n", name, worst);
    for (int k = 0; k < N_SEQ; k++)
        free(ref[k]);
    free(ids);
    woolly_batch_free(&b);
    woolly_context_close(c);
    woolly_model_close(m);
}

Test(batch, stories260K_batched_logits_equal_alone)
{
    check_batched_equals_alone("stories260K");
}

Test(batch, q4_k_m_batched_logits_equal_alone)
{
    check_batched_equals_alone("tiny-llama-q4_k_m");
}

Test(batch, granite_batched_logits_equal_alone)
{
    check_batched_equals_alone("tiny-granite-q4_k_m");
}

/* ---- a long prompt in one forward pass ------------------------------------------------------------ */

enum { LONG_PROMPT = 600, SHORT_BATCH = 100 };

/* A prompt longer than WOOLLY_FFN_TOKENS (512) in one batch runs the feed-forward in passes of 512 and 88
 * tokens; in batches of 100 it runs in one pass per batch. Every position's logits agree. (The tiny models
 * were trained on 512 positions; the context runs past that, which changes nothing here.) */
static void check_long_prompt_equals_short_batches(const char *name)
{
    woolly_model *m = open_model(name);
    const int n_vocab = woolly_model_n_vocab(m);
    woolly_token ids[LONG_PROMPT];
    for (int i = 0; i < LONG_PROMPT; i++)
        ids[i] = (woolly_token)((i * 7919 + 13) % n_vocab);

    woolly_context_params p = woolly_context_default_params();
    p.n_ctx = 1024;
    p.n_threads = 2;
    p.logits_all = true;
    p.n_batch = LONG_PROMPT;
    woolly_context *whole = woolly_context_open(m, &p);
    p.n_batch = SHORT_BATCH;
    woolly_context *parts = woolly_context_open(m, &p);
    cr_assert(whole && parts, "%s", woolly_last_error());

    cr_assert_eq(woolly_eval(whole, ids, LONG_PROMPT), 0, "%s", woolly_last_error());
    double worst = 0;
    for (int t0 = 0; t0 < LONG_PROMPT; t0 += SHORT_BATCH) {
        cr_assert_eq(woolly_eval(parts, ids + t0, SHORT_BATCH), 0, "%s", woolly_last_error());
        for (int i = 0; i < SHORT_BATCH; i++) {
            const double e =
                tu_nmse(woolly_get_logits(whole, t0 + i), woolly_get_logits(parts, i), (size_t)n_vocab);
            worst = e > worst ? e : worst;
            cr_expect_leq(e, BATCH_MAX_NMSE, "%s: position %d: NMSE %g one batch vs batches of %d", name,
                          t0 + i, e, SHORT_BATCH);
        }
    }
    fprintf(stderr, "NMSE %s %d tokens in one batch vs batches of %d: max %.3g\n", name, LONG_PROMPT,
            SHORT_BATCH, worst);
    woolly_context_close(parts);
    woolly_context_close(whole);
    woolly_model_close(m);
}

Test(batch, q4_k_m_long_prompt_equals_short_batches)
{
    check_long_prompt_equals_short_batches("tiny-llama-q4_k_m");
}

Test(batch, granite_long_prompt_equals_short_batches)
{
    check_long_prompt_equals_short_batches("tiny-granite-q4_k_m");
}

/* ---- greedy text ---------------------------------------------------------------------------------- */

enum { GREEDY_SEQ = 4, GREEDY_CTX = 160 };
static const char *const GREEDY_PROMPTS[GREEDY_SEQ] = {"Once upon a time", "Lily and Tom", "The cat",
                                                       "One day, a little"};
/* Different lengths, so that sequences end mid-batch while the others go on. */
static const int GREEDY_NEW[GREEDY_SEQ] = {120, 40, 90, 140};

/* Greedy continuation of one prompt alone: the woolly_eval path. Returns the token count. */
static int greedy_alone(woolly_model *m, const char *prompt, int n_new, woolly_token *out)
{
    woolly_context *c = open_ctx(m, GREEDY_CTX, 64, 1);
    int n = woolly_model_tokenize(m, prompt, strlen(prompt), true, false, out, GREEDY_CTX);
    cr_assert(n > 0 && n + n_new <= GREEDY_CTX);
    cr_assert_eq(woolly_eval(c, out, n), 0, "%s", woolly_last_error());
    for (int i = 0; i < n_new; i++) {
        const woolly_token t = woolly_sample_greedy(woolly_get_logits(c, -1), woolly_model_n_vocab(m));
        if (woolly_token_is_eog(m, t))
            break;
        out[n++] = t;
        cr_assert_eq(woolly_eval(c, &t, 1), 0, "%s", woolly_last_error());
    }
    woolly_context_close(c);
    return n;
}

Test(batch, stories260K_greedy_text_alone_equals_batched_scalar)
{
    setenv("WOOLLY_ISA", "scalar", 1); /* before the model opens: the reference kernels */
    woolly_model *m = open_model("stories260K");
    cr_assert_null(woolly_model_tune_profile(m), "no tuning profile");
    static woolly_token want[GREEDY_SEQ][GREEDY_CTX], got[GREEDY_SEQ][GREEDY_CTX];
    int n_want[GREEDY_SEQ], n_got[GREEDY_SEQ], logits_at[GREEDY_SEQ], n_prompt[GREEDY_SEQ];
    for (int s = 0; s < GREEDY_SEQ; s++)
        n_want[s] = greedy_alone(m, GREEDY_PROMPTS[s], GREEDY_NEW[s], want[s]);

    woolly_context *c = open_ctx(m, GREEDY_CTX, 64, GREEDY_SEQ);
    woolly_batch b;
    cr_assert_eq(woolly_batch_init(&b, 64), 0);
    for (int s = 0; s < GREEDY_SEQ; s++) {
        n_got[s] = n_prompt[s] =
            woolly_model_tokenize(m, GREEDY_PROMPTS[s], strlen(GREEDY_PROMPTS[s]), true, false, got[s], 64);
        for (int i = 0; i < n_got[s]; i++)
            woolly_batch_add(&b, got[s][i], i, s, i == n_got[s] - 1);
        logits_at[s] = b.n_tokens - 1;
    }
    bool done[GREEDY_SEQ] = {false};
    while (b.n_tokens > 0) {
        cr_assert_eq(woolly_decode(c, &b), 0, "%s", woolly_last_error());
        b.n_tokens = 0;
        for (int s = 0; s < GREEDY_SEQ; s++) {
            if (done[s])
                continue;
            const woolly_token t =
                woolly_sample_greedy(woolly_get_logits(c, logits_at[s]), woolly_model_n_vocab(m));
            if (woolly_token_is_eog(m, t) || n_got[s] - n_prompt[s] == GREEDY_NEW[s]) {
                done[s] = true;
                cr_assert_eq(woolly_seq_rewind(c, s, 0), 0); /* ends mid-batch: the others go on */
                continue;
            }
            got[s][n_got[s]] = t;
            woolly_batch_add(&b, t, n_got[s]++, s, true);
            logits_at[s] = b.n_tokens - 1;
        }
    }
    for (int s = 0; s < GREEDY_SEQ; s++) {
        char a[4096], g[4096];
        woolly_model_detokenize(m, want[s], n_want[s], a, sizeof a);
        woolly_model_detokenize(m, got[s], n_got[s], g, sizeof g);
        cr_expect_str_eq(g, a, "sequence %d: batched text differs from alone", s);
        cr_expect_eq(n_got[s], n_want[s]);
    }
    woolly_batch_free(&b);
    woolly_context_close(c);
    woolly_model_close(m);
}

/* ---- a sequence's cache --------------------------------------------------------------------------- */

static const woolly_token STORY[8] = {1, 403, 407, 261, 378, 267, 370, 331};

/* One token of a sequence as a batch of one. */
static int decode_one(woolly_context *c, woolly_batch *b, woolly_token t, int32_t pos, int32_t seq)
{
    b->n_tokens = 0;
    woolly_batch_add(b, t, pos, seq, true);
    return woolly_decode(c, b);
}

/* STORY[0 .. n) as sequence seq's prompt, in one batch, keeping the last token's logits. */
static void story_prompt(woolly_context *c, woolly_batch *b, int n, int32_t seq)
{
    b->n_tokens = 0;
    for (int i = 0; i < n; i++)
        woolly_batch_add(b, STORY[i], i, seq, i == n - 1);
    cr_assert_eq(woolly_decode(c, b), 0, "%s", woolly_last_error());
}

/* A sequence whose context is full gets a clear error while the other goes on; clearing it frees its
 * whole region at once (the next prompt fills it again, with the logits of a fresh context), and does
 * not touch the other sequence. */
Test(batch, ending_a_sequence_frees_its_cache_at_once)
{
    woolly_model *m = open_model("stories260K");
    woolly_context *c = open_ctx(m, 8, 8, 2);
    woolly_batch b;
    cr_assert_eq(woolly_batch_init(&b, 8), 0);
    story_prompt(c, &b, 8, 0);
    float first[512];
    memcpy(first, woolly_get_logits(c, 7), sizeof first);
    cr_assert_eq(woolly_seq_n_past(c, 0), 8);
    cr_assert_eq(woolly_seq_n_past(c, 1), 0);

    /* Sequence 0 is full: one more token is refused, naming it; sequence 1 still has all its room. */
    cr_expect_eq(decode_one(c, &b, 1, 8, 0), -1);
    cr_expect(strstr(woolly_last_error(), "sequence 0") && strstr(woolly_last_error(), "context full"), "%s",
              woolly_last_error());
    for (int i = 0; i < 5; i++)
        cr_assert_eq(decode_one(c, &b, STORY[i], i, 1), 0, "%s", woolly_last_error());

    /* Cleared: its 8 positions are free at once, and refilled they give the same logits. */
    cr_assert_eq(woolly_seq_rewind(c, 0, 0), 0);
    cr_expect_eq(woolly_seq_n_past(c, 0), 0);
    cr_expect_eq(woolly_seq_n_past(c, 1), 5, "the other sequence is untouched");
    story_prompt(c, &b, 8, 0);
    cr_expect_leq(tu_nmse(woolly_get_logits(c, 7), first, 512), 1e-12);

    /* The other sequence goes on as if nothing happened: its next logits equal those of a lone
     * context's. */
    cr_assert_eq(decode_one(c, &b, STORY[5], 5, 1), 0, "%s", woolly_last_error());
    woolly_context *lone = open_ctx(m, 8, 8, 1);
    cr_assert_eq(woolly_eval(lone, STORY, 6), 0);
    cr_expect_leq(tu_nmse(woolly_get_logits(c, 0), woolly_get_logits(lone, -1), 512), BATCH_MAX_NMSE);
    woolly_context_close(lone);
    woolly_batch_free(&b);
    woolly_context_close(c);
    woolly_model_close(m);
}

/* A sequence that takes another's first positions (woolly_seq_copy) goes on from them with the logits
 * of a context that evaluated the whole story itself; the source and a third sequence are untouched;
 * bad copies are clear errors that change nothing. */
Test(batch, a_copied_beginning_continues_like_an_evaluated_one)
{
    woolly_model *m = open_model("stories260K");
    woolly_context *c = open_ctx(m, 8, 8, 3);
    woolly_batch b;
    cr_assert_eq(woolly_batch_init(&b, 8), 0);
    story_prompt(c, &b, 6, 0);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(decode_one(c, &b, STORY[7 - i], i, 2), 0, "%s", woolly_last_error());

    cr_assert_eq(woolly_seq_copy(c, 0, 1, 5), 0, "%s", woolly_last_error());
    cr_expect_eq(woolly_seq_n_past(c, 1), 5);
    cr_expect_eq(woolly_seq_n_past(c, 0), 6, "the source is untouched");
    cr_expect_eq(woolly_seq_n_past(c, 2), 2, "a third sequence is untouched");
    /* Sequence 1 goes on from position 5 with the story's own token 5, then 6. */
    woolly_context *lone = open_ctx(m, 8, 8, 1);
    for (int i = 5; i < 7; i++) {
        cr_assert_eq(decode_one(c, &b, STORY[i], i, 1), 0, "%s", woolly_last_error());
        cr_assert_eq(woolly_eval(lone, STORY, i + 1), 0);
        cr_expect_leq(tu_nmse(woolly_get_logits(c, 0), woolly_get_logits(lone, -1), 512), BATCH_MAX_NMSE,
                      "position %d", i);
        woolly_seq_rewind(lone, 0, 0);
    }
    woolly_context_close(lone);

    const struct {
        int32_t src, dst, n;
        const char *what;
    } bad[] = {{0, 0, 2, "two different ids"},
               {0, 3, 2, "two different ids"},
               {-1, 1, 2, "two different ids"},
               {0, 1, 7, "its cache holds 6"},
               {2, 1, -1, "its cache holds 2"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_eq(woolly_seq_copy(c, bad[i].src, bad[i].dst, bad[i].n), -1, "copy %d -> %d of %d",
                     bad[i].src, bad[i].dst, bad[i].n);
        cr_expect(strstr(woolly_last_error(), bad[i].what) != NULL, "'%s' does not say '%s'",
                  woolly_last_error(), bad[i].what);
        cr_expect_eq(woolly_seq_n_past(c, 1), 7, "a refused copy changes nothing");
    }
    woolly_batch_free(&b);
    woolly_context_close(c);
    woolly_model_close(m);
}

/* ---- a prompt's token that comes alone ------------------------------------------------------------ */

enum { CUT_PROMPT = 24 };

/* The attention calls of one query since the last reset: how many, and how many asked for the tiles. */
static atomic_int g_lone_calls, g_lone_tiled;

static void observe_lone(const woolly_kernel *k, const woolly_attn_args *a, int ith, int nth)
{
    (void)k, (void)ith, (void)nth;
    if (a->n_q == 1) {
        atomic_fetch_add(&g_lone_calls, 1);
        atomic_fetch_add(&g_lone_tiled, a->one_query_tiles != 0);
    }
}

/* Evaluates token t of sequence seq alone (its logits kept) and checks how its attention ran: every call
 * on the tiles, or every one on the one-query path of generated tokens. */
static void expect_lone(woolly_context *c, woolly_batch *b, woolly_token t, int32_t pos, int32_t seq,
                        bool tiled, const char *what)
{
    atomic_store(&g_lone_calls, 0);
    atomic_store(&g_lone_tiled, 0);
    cr_assert_eq(decode_one(c, b, t, pos, seq), 0, "%s", woolly_last_error());
    const int calls = atomic_load(&g_lone_calls), on_tiles = atomic_load(&g_lone_tiled);
    cr_expect(calls > 0 && on_tiles == (tiled ? calls : 0), "%s: %d of %d calls on the tiles, expected %s",
              what, on_tiles, calls, tiled ? "all" : "none");
}

/* Where a prompt's last token comes alone: after the rest of the prompt in a batch that kept no logits
 * (a server's prompt cut by its token budget), or after a copy of another sequence's beginning (a
 * reused prefix). It was not sampled from logits, so it is a prompt's token: its attention takes the
 * tiles, as in the whole prompt's batch, and not the one-query path of generated tokens, whose numbers
 * differ from rounded tiles' (int16 at the AVX2 level, BF16 at AVX-512 on AMD) by their rounding: taken
 * for this token with int16 tiles on a Zen 3, that path moved these logits by 1.3e-4 of NMSE. The token
 * after it, sampled from its logits, takes the one-query path. Its logits are those of the whole prompt
 * within BATCH_MAX_NMSE; at the x86 levels, whose int8 matmuls give a token the same bits at any batch
 * size (test_matmul_batch), bit for bit. */
Test(batch, a_prompt_token_alone_takes_the_tiles_and_gets_the_whole_prompts_logits)
{
    woolly_model *m = open_model("tiny-llama-q4_k_m");
    const int n_vocab = woolly_model_n_vocab(m);
    woolly_context *c = open_ctx(m, 64, 64, 3);
    woolly_batch b;
    cr_assert_eq(woolly_batch_init(&b, 64), 0);
    woolly_token ids[CUT_PROMPT + 1];
    for (int i = 0; i <= CUT_PROMPT; i++)
        ids[i] = (woolly_token)((i * 7919 + 13) % n_vocab);

    /* sequence 0: the whole prompt in one batch */
    for (int i = 0; i < CUT_PROMPT; i++)
        woolly_batch_add(&b, ids[i], i, 0, i == CUT_PROMPT - 1);
    cr_assert_eq(woolly_decode(c, &b), 0, "%s", woolly_last_error());
    float *whole = malloc(sizeof(float) * (size_t)n_vocab);
    cr_assert(whole != NULL);
    memcpy(whole, woolly_get_logits(c, CUT_PROMPT - 1), sizeof(float) * (size_t)n_vocab);

    woolly_attn_set_observer(observe_lone);
    /* sequence 1: all but the last token without logits, then the last alone, then one generated */
    b.n_tokens = 0;
    for (int i = 0; i < CUT_PROMPT - 1; i++)
        woolly_batch_add(&b, ids[i], i, 1, false);
    cr_assert_eq(woolly_decode(c, &b), 0, "%s", woolly_last_error());
    expect_lone(c, &b, ids[CUT_PROMPT - 1], CUT_PROMPT - 1, 1, true, "after the rest of the prompt");
    const double cut = tu_nmse(woolly_get_logits(c, 0), whole, (size_t)n_vocab);
    expect_lone(c, &b, ids[CUT_PROMPT], CUT_PROMPT, 1, false, "the token sampled after it");

    /* sequence 2: sequence 0's beginning copied, then the last token alone */
    cr_assert_eq(woolly_seq_copy(c, 0, 2, CUT_PROMPT - 1), 0, "%s", woolly_last_error());
    expect_lone(c, &b, ids[CUT_PROMPT - 1], CUT_PROMPT - 1, 2, true, "after a copied beginning");
    const double copied = tu_nmse(woolly_get_logits(c, 0), whole, (size_t)n_vocab);

    /* sequence 0 rewound to before its last token, which comes again alone: a prompt's again */
    cr_assert_eq(woolly_seq_rewind(c, 0, CUT_PROMPT - 1), 0, "%s", woolly_last_error());
    expect_lone(c, &b, ids[CUT_PROMPT - 1], CUT_PROMPT - 1, 0, true, "after a rewind");
    woolly_attn_set_observer(NULL);
    fprintf(stderr,
            "NMSE of a prompt's last token alone against the whole: %.3g after a batch, %.3g after a copy\n",
            cut, copied);
    const enum woolly_isa isa = woolly_isa_active();
    const double bar = isa == WOOLLY_ISA_AVX2 || isa == WOOLLY_ISA_AVX512 ? 0.0 : BATCH_MAX_NMSE;
    cr_expect_leq(cut, bar, "after the rest of the prompt: NMSE %g", cut);
    cr_expect_leq(copied, bar, "after a copied beginning: NMSE %g", copied);
    free(whole);
    woolly_batch_free(&b);
    woolly_context_close(c);
    woolly_model_close(m);
}

/* ---- bad batches ---------------------------------------------------------------------------------- */

/* Decoding b fails with a message containing `what`, and no sequence moves. */
static void expect_refused(woolly_context *c, const woolly_batch *b, const char *what)
{
    const int32_t n0 = woolly_seq_n_past(c, 0), n1 = woolly_seq_n_past(c, 1);
    cr_expect_eq(woolly_decode(c, b), -1, "a batch with %s is refused", what);
    cr_expect(strstr(woolly_last_error(), what) != NULL, "'%s' does not say '%s'", woolly_last_error(), what);
    cr_expect_eq(woolly_seq_n_past(c, 0), n0, "nothing evaluated (%s)", what);
    cr_expect_eq(woolly_seq_n_past(c, 1), n1, "nothing evaluated (%s)", what);
}

Test(batch, bad_batches_are_clear_errors)
{
    woolly_model *m = open_model("stories260K");
    woolly_context *c = open_ctx(m, 16, 8, 2);
    woolly_batch b;
    cr_assert_eq(woolly_batch_init(&b, 16), 0);
    /* A valid start: sequence 0 at 3 tokens, sequence 1 at 2. */
    woolly_batch_add(&b, 1, 0, 0, false);
    woolly_batch_add(&b, 1, 0, 1, false);
    woolly_batch_add(&b, 403, 1, 0, false);
    woolly_batch_add(&b, 407, 2, 0, true);
    woolly_batch_add(&b, 403, 1, 1, true);
    cr_assert_eq(woolly_decode(c, &b), 0, "%s", woolly_last_error());
    cr_assert_eq(woolly_seq_n_past(c, 0), 3);
    cr_assert_eq(woolly_seq_n_past(c, 1), 2);

    b.n_tokens = 0;
    woolly_batch_add(&b, 261, 3, 2, true);
    expect_refused(c, &b, "sequence id 2 (at index 0) is out of range [0, 2)");
    b.seq_id[0] = -1;
    expect_refused(c, &b, "sequence id -1");

    b.n_tokens = 0;
    woolly_batch_add(&b, 261, 2, 1, true);
    woolly_batch_add(&b, 261, 4, 0, true); /* skips position 3 */
    expect_refused(c, &b, "position 4 of sequence 0, which continues at position 3");
    b.pos[1] = 2; /* goes back */
    expect_refused(c, &b, "position 2 of sequence 0, which continues at position 3");
    b.n_tokens = 0;
    woolly_batch_add(&b, 261, 3, 0, false);
    woolly_batch_add(&b, 378, 3, 0, true); /* the same position twice in one batch */
    expect_refused(c, &b, "continues at position 4");

    b.n_tokens = 0;
    woolly_batch_add(&b, 512, 3, 0, true);
    expect_refused(c, &b, "token id 512 (at index 0) is out of range");

    /* Overflow of one sequence: sequence 1 has 2 of 16 positions; 15 more do not fit (the batch size
     * is 8, so over two batches: the second is refused whole). */
    b.n_tokens = 0;
    for (int i = 0; i < 8; i++)
        woolly_batch_add(&b, 300, 2 + i, 1, i == 7);
    cr_assert_eq(woolly_decode(c, &b), 0, "%s", woolly_last_error());
    b.n_tokens = 0;
    for (int i = 0; i < 7; i++)
        woolly_batch_add(&b, 300, 10 + i, 1, i == 6);
    expect_refused(c, &b, "context full: sequence 1 holds 10 tokens");

    /* More tokens than n_batch, more logits than sequences, nothing at all. */
    b.n_tokens = 0;
    for (int i = 0; i < 9; i++)
        woolly_batch_add(&b, 300, 3 + i, 0, false);
    expect_refused(c, &b, "a batch of 9 tokens exceeds the context's batch size 8");
    b.n_tokens = 0;
    for (int i = 0; i < 3; i++)
        woolly_batch_add(&b, 300, 3 + i, 0, true);
    expect_refused(c, &b, "logits of 3 tokens");
    b.n_tokens = 0;
    expect_refused(c, &b, "nothing to evaluate");

    /* A full batch refuses one more token; a rewind past the cache is refused. */
    woolly_batch small;
    cr_assert_eq(woolly_batch_init(&small, 1), 0);
    cr_expect_eq(woolly_batch_add(&small, 1, 0, 0, true), 0);
    cr_expect_eq(woolly_batch_add(&small, 1, 1, 0, true), -1);
    cr_expect(strstr(woolly_last_error(), "full") != NULL, "%s", woolly_last_error());
    cr_expect_eq(woolly_seq_rewind(c, 0, 4), -1);
    cr_expect_eq(woolly_seq_rewind(c, 5, 0), -1);
    cr_expect(strstr(woolly_last_error(), "sequence id 5") != NULL, "%s", woolly_last_error());
    cr_expect_eq(woolly_seq_n_past(c, 7), -1);
    woolly_batch_free(&small);

    /* Asking for logits a token did not keep is refused. */
    b.n_tokens = 0;
    woolly_batch_add(&b, 261, 3, 0, false);
    woolly_batch_add(&b, 261, 10, 1, true);
    cr_assert_eq(woolly_decode(c, &b), 0, "%s", woolly_last_error());
    cr_expect_null(woolly_get_logits(c, 0));
    cr_expect(woolly_get_logits(c, 1) != NULL);
    cr_expect(woolly_get_logits(c, -1) != NULL);

    woolly_batch_free(&b);
    woolly_context_close(c);
    woolly_model_close(m);
}

Test(batch, too_many_sequences_is_refused)
{
    woolly_model *m = open_model("stories260K");
    woolly_context_params p = woolly_context_default_params();
    p.n_ctx = 16;
    p.n_seq_max = -1;
    cr_expect_null(woolly_context_open(m, &p));
    cr_expect(strstr(woolly_last_error(), "n_seq_max -1") != NULL, "%s", woolly_last_error());
    p.n_seq_max = 100000;
    cr_expect_null(woolly_context_open(m, &p));
    cr_expect(strstr(woolly_last_error(), "100000 sequences") != NULL, "%s", woolly_last_error());
    woolly_model_close(m);
}
