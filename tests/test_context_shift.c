/* Context shift (woolly_context_shift / woolly_seq_shift) on the real stories260K model: the kept
 * tokens and positions, the cache afterwards against a fresh evaluation of the shortened sequence, a long
 * greedy generation through a tiny context that shifts many times, and bad arguments. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "woolly.h"

#define N_VOCAB 512

static woolly_model *open_stories(void)
{
    woolly_model *m = woolly_model_open(tu_data("models/stories260K.gguf"));
    cr_assert(m != NULL, "%s", woolly_last_error());
    return m;
}

static woolly_context *open_ctx(woolly_model *m, int n_ctx, int n_seq)
{
    woolly_context_params p = woolly_context_default_params();
    p.n_ctx = n_ctx;
    p.n_batch = 16; /* smaller than the tails re-evaluated below: they go in several batches */
    p.n_threads = 2;
    p.n_seq_max = n_seq;
    woolly_context *c = woolly_context_open(m, &p);
    cr_assert(c != NULL, "%s", woolly_last_error());
    return c;
}

/* n greedy tokens after BOS + "Once upon a time", evaluated one by one into c; returns them in out. */
static void greedy_fill(woolly_context *c, woolly_token *out, int32_t n)
{
    static const woolly_token prompt[5] = {1, 403, 407, 261, 378};
    memcpy(out, prompt, sizeof prompt);
    cr_assert_eq(woolly_eval(c, prompt, 5), 0, "%s", woolly_last_error());
    for (int32_t i = 5; i < n; i++) {
        out[i] = woolly_sample_greedy(woolly_get_logits(c, -1), N_VOCAB);
        cr_assert_eq(woolly_eval(c, &out[i], 1), 0, "%s", woolly_last_error());
    }
}

static double nmse(const float *x, const float *ref, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        num += ((double)x[i] - ref[i]) * ((double)x[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return num / den;
}

/* Identity: after a shift the context is the shortened sequence. Its next logits match a fresh context
 * that evaluated exactly the kept tokens (up to the rounding of a different batch split). */
Test(context_shift, keeps_head_and_tail_and_matches_a_fresh_evaluation)
{
    woolly_model *m = open_stories();
    woolly_context *c = open_ctx(m, 64, 1);
    woolly_token toks[64], before[64];
    greedy_fill(c, toks, 60);
    memcpy(before, toks, sizeof toks);
    const int32_t n_keep = 5, n_discard = 20;
    const int32_t n = woolly_context_shift(c, toks, 60, n_keep, n_discard);
    cr_assert_eq(n, 40, "%s", woolly_last_error());
    cr_assert_eq(woolly_context_n_past(c), 40);
    cr_assert(memcmp(toks, before, n_keep * sizeof *toks) == 0, "the first n_keep tokens stay");
    cr_assert(memcmp(toks + n_keep, before + n_keep + n_discard,
                     (size_t)(60 - n_keep - n_discard) * sizeof *toks) == 0,
              "the tail moves down to n_keep");
    const float *after_shift = woolly_get_logits(c, -1);
    cr_assert(after_shift != NULL);
    float got[N_VOCAB];
    memcpy(got, after_shift, sizeof got);

    woolly_context *fresh = open_ctx(m, 64, 1);
    cr_assert_eq(woolly_eval(fresh, toks, 40), 0, "%s", woolly_last_error());
    const double e = nmse(got, woolly_get_logits(fresh, -1), N_VOCAB);
    cr_assert_lt(e, 1e-8, "logits after the shift differ from a fresh evaluation: NMSE %g", e);

    /* And both continue alike: the next token's logits too. */
    const woolly_token next = woolly_sample_greedy(got, N_VOCAB);
    cr_assert_eq(woolly_eval(c, &next, 1), 0);
    cr_assert_eq(woolly_eval(fresh, &next, 1), 0);
    memcpy(got, woolly_get_logits(c, -1), sizeof got);
    cr_assert_lt(nmse(got, woolly_get_logits(fresh, -1), N_VOCAB), 1e-8);
    woolly_context_close(fresh);
    woolly_context_close(c);
    woolly_model_close(m);
}

/* A generation of 400 tokens through a context of 48 positions, shifting by half of what follows the
 * 5 kept tokens whenever it is full, as a chat with --context-shift does. */
Test(context_shift, long_generation_through_a_tiny_context)
{
    woolly_model *m = open_stories();
    const int32_t n_ctx = 48, n_keep = 5;
    woolly_context *c = open_ctx(m, n_ctx, 1);
    woolly_token toks[48];
    greedy_fill(c, toks, 6);
    int32_t n = 6, shifts = 0;
    woolly_token head[5];
    memcpy(head, toks, sizeof head);
    for (int32_t generated = 0; generated < 400; generated++) {
        const woolly_token t = woolly_sample_greedy(woolly_get_logits(c, -1), N_VOCAB);
        cr_assert(t >= 0 && t < N_VOCAB);
        if (n == n_ctx) {
            const int32_t n_discard = (n - n_keep) / 2;
            const woolly_token first_kept = toks[n_keep + n_discard], last = toks[n - 1];
            n = woolly_context_shift(c, toks, n, n_keep, n_discard);
            cr_assert_eq(n, n_ctx - n_discard, "%s", woolly_last_error());
            cr_assert(memcmp(toks, head, sizeof head) == 0);
            cr_assert_eq(toks[n_keep], first_kept);
            cr_assert_eq(toks[n - 1], last);
            shifts++;
        }
        cr_assert_eq(woolly_eval(c, &t, 1), 0, "token %d: %s", generated, woolly_last_error());
        toks[n++] = t;
        cr_assert_eq(woolly_context_n_past(c), n);
    }
    cr_assert_geq(shifts, 15, "only %d shifts", shifts);
    woolly_context_close(c);
    woolly_model_close(m);
}

/* Another sequence of a batched context shifts on its own; sequence 0 is untouched. */
Test(context_shift, one_sequence_of_several)
{
    woolly_model *m = open_stories();
    woolly_context *c = open_ctx(m, 32, 2);
    woolly_token toks[32];
    greedy_fill(c, toks, 30);
    cr_assert_eq(woolly_seq_copy(c, 0, 1, 30), 0, "%s", woolly_last_error());
    cr_assert_eq(woolly_seq_shift(c, 1, toks, 30, 1, 10), 20, "%s", woolly_last_error());
    cr_assert_eq(woolly_seq_n_past(c, 1), 20);
    cr_assert_eq(woolly_seq_n_past(c, 0), 30);
    woolly_context_close(c);
    woolly_model_close(m);
}

Test(context_shift, bad_arguments)
{
    woolly_model *m = open_stories();
    woolly_context *c = open_ctx(m, 32, 1);
    woolly_token toks[32];
    greedy_fill(c, toks, 10);
    cr_expect_eq(woolly_context_shift(c, toks, 9, 1, 2), -1, "n is not the cache's length");
    cr_expect(strstr(woolly_last_error(), "holds 10") != NULL, "%s", woolly_last_error());
    cr_expect_eq(woolly_context_shift(c, toks, 10, 1, 0), -1, "nothing to drop");
    cr_expect_eq(woolly_context_shift(c, toks, 10, 5, 6), -1, "more than there is");
    cr_expect_eq(woolly_context_shift(c, toks, 10, -1, 2), -1);
    cr_expect_eq(woolly_seq_shift(c, 3, toks, 10, 1, 2), -1);
    cr_expect(strstr(woolly_last_error(), "out of range") != NULL, "%s", woolly_last_error());
    cr_expect_eq(woolly_context_shift(c, NULL, 10, 1, 2), -1);
    cr_expect_eq(woolly_context_n_past(c), 10, "a refused shift changes nothing");
    /* Dropping everything after n_keep leaves just the head. */
    cr_expect_eq(woolly_context_shift(c, toks, 10, 4, 6), 4);
    cr_expect_eq(woolly_context_n_past(c), 4);
    woolly_context_close(c);
    woolly_model_close(m);
}
