/* The server's step (runtime/server/scheduler.c) when it speculates: one slot's plan (its sampled token
 * and two guesses, each a run of its own on the decode path, as decode_seqs marks its sequence) and
 * another slot's prompt chunk (the prompt path) in one forward pass give every logits row of the two
 * passes the server ran before (the chunk alone, then the plan with decode_runs): each token keeps its
 * path, and only the batch's size differs (BATCH_MAX_NMSE, as test_batch's; measured: bitwise equal with
 * Q4_K_M and F16 weights on AVX-512). With Q4_K_M weights a guess put on the prompt path misses by far
 * more (measured: nmse 8e-5; checked, so that the test can tell; with tiny-qwen3-f16 the two paths agree
 * within 2e-13). tiny-llama-q4_k_m and tiny-qwen3-f16, 1 and 2 threads, prompts of 5, 147 and 289 tokens,
 * chunks of 1 and 20. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "testutil.h"

#define BATCH_MAX_NMSE 1e-7

enum { SEQS = 2, PLAN = 3, CHUNK_MAX = 20 };

static woolly_batch batch;

/* Sequences 0 and 1 hold a prompt of len tokens (made afresh: no rewind leaves its marks). */
static void prefill(woolly_context *c, int len)
{
    for (int s = 0; s < SEQS; s++) {
        cr_assert_eq(woolly_seq_rewind(c, s, 0), 0);
        batch.n_tokens = 0;
        for (int i = 0; i < len; i++)
            woolly_batch_add(&batch, (i * 7 + s) % 300 + 3, i, s, i == len - 1);
        cr_assert_eq(woolly_decode(c, &batch), 0, "%s", woolly_last_error());
    }
}

static void add_plan(int len)
{
    for (int i = 0; i < PLAN; i++)
        woolly_batch_add(&batch, 42 + 5 * i, len + i, 0, true);
}

static void add_chunk(int len, int n)
{
    for (int i = 0; i < n; i++)
        woolly_batch_add(&batch, 100 + i, len + i, 1, true);
}

static double nmse(const float *got, const float *want, int n)
{
    double e = 0.0, s = 0.0;
    for (int i = 0; i < n; i++) {
        e += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        s += (double)want[i] * want[i];
    }
    return s > 0.0 ? e / s : e;
}

static void check(const char *name, int threads, bool paths_differ)
{
    char rel[128];
    snprintf(rel, sizeof rel, "models/%s.gguf", name);
    woolly_model *m = woolly_model_open(tu_data(rel));
    cr_assert(m != NULL, "%s", woolly_last_error());
    woolly_context_params p = woolly_context_default_params();
    p.n_ctx = 512;
    p.n_batch = 512;
    p.n_threads = threads;
    p.n_seq_max = SEQS;
    p.logits_all = true;
    woolly_context *c = woolly_context_open(m, &p);
    cr_assert(c != NULL, "%s", woolly_last_error());
    cr_assert_eq(woolly_batch_init(&batch, 512), 0);
    const int nv = woolly_model_n_vocab(m);
    float *want = malloc(sizeof(float) * (size_t)nv * (PLAN + CHUNK_MAX));
    cr_assert(want != NULL);
    const bool marks[SEQS] = {true, false}, none[SEQS] = {false, false};
    double worst = 0.0, wrong = 1.0;
    for (int len = 5; len <= 300; len += 142)
        for (int n = 1; n <= CHUNK_MAX; n += CHUNK_MAX - 1) {
            /* Two passes: the chunk, then the plan on the decode path. */
            prefill(c, len);
            batch.n_tokens = 0;
            add_chunk(len, n);
            cr_assert_eq(woolly_decode(c, &batch), 0, "%s", woolly_last_error());
            for (int i = 0; i < n; i++)
                memcpy(want + (size_t)(PLAN + i) * nv, woolly_get_logits(c, i), sizeof(float) * (size_t)nv);
            batch.n_tokens = 0;
            add_plan(len);
            c->decode_runs = true;
            cr_assert_eq(woolly_decode(c, &batch), 0, "%s", woolly_last_error());
            c->decode_runs = false;
            for (int i = 0; i < PLAN; i++)
                memcpy(want + (size_t)i * nv, woolly_get_logits(c, i), sizeof(float) * (size_t)nv);
            /* One pass, the plan's sequence marked; then unmarked, so that its guesses take the prompt
             * path: that must miss. */
            for (int mark = 1; mark >= 0; mark--) {
                prefill(c, len);
                batch.n_tokens = 0;
                add_plan(len);
                add_chunk(len, n);
                c->decode_seqs = mark ? marks : none;
                cr_assert_eq(woolly_decode(c, &batch), 0, "%s", woolly_last_error());
                c->decode_seqs = NULL;
                for (int i = 0; i < PLAN + n; i++) {
                    const double e = nmse(woolly_get_logits(c, i), want + (size_t)i * nv, nv);
                    if (mark) {
                        cr_expect(e <= BATCH_MAX_NMSE, "%s, %d threads, prompt %d, chunk %d: row %d nmse %g",
                                  name, threads, len, n, i, e);
                        worst = e > worst ? e : worst;
                    } else if (i > 0 && i < PLAN) {
                        wrong = e < wrong ? e : wrong;
                    }
                }
            }
        }
    /* Where the prompt's tiles take P V in FP16 (the _fp16 kernels, the default where AVX512-FP16 runs),
     * their one-query path rounds as the tiles do by design, so the two paths agree (measured: bitwise on
     * an Intel Xeon) and a guess on the wrong one cannot be told by its numbers. */
    const size_t nl = strlen(c->attn->name);
    const bool fp16_tiles = nl > 5 && !strcmp(c->attn->name + nl - 5, "_fp16");
    if (paths_differ && !fp16_tiles)
        cr_expect(wrong > 100 * BATCH_MAX_NMSE, "%s: guesses on the prompt path miss by only %g", name,
                  wrong);
    cr_log_info("%s, %d threads, %s: worst nmse %g one pass against two; guesses on the wrong path: %g at least",
                name, threads, c->attn->name, worst, wrong);
    free(want);
    woolly_batch_free(&batch);
    woolly_context_close(c);
    woolly_model_close(m);
}

Test(batch_mixed, q4_k_m_one_pass_gives_the_two_passes_logits)
{
    check("tiny-llama-q4_k_m", 1, true);
    check("tiny-llama-q4_k_m", 2, true);
}

Test(batch_mixed, f16_one_pass_gives_the_two_passes_logits)
{
    check("tiny-qwen3-f16", 1, false);
    check("tiny-qwen3-f16", 2, false);
}
