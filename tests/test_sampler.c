/* The sampler: greedy, temperature, top-k, top-p, min-p, repetition penalty, seeds, bad parameters. The
 * distributions are checked by drawing many times with a fixed seed and comparing the frequencies with
 * the probabilities the filters should leave. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "sampler.h"

enum { N_DRAWS = 40000 };
#define FREQ_TOL 0.015 /* ~ 4 standard deviations of a frequency near 0.5 over N_DRAWS draws */

static woolly_sampler_params plain(float temp)
{
    woolly_sampler_params p = woolly_sampler_default_params();
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.seed = 1234;
    return p;
}

static woolly_sampler *make(int n_vocab, const woolly_sampler_params *p)
{
    woolly_error err = {{0}};
    woolly_sampler *s = woolly_sampler_create(n_vocab, p, &err);
    cr_assert(s != NULL, "%s", err.msg);
    return s;
}

/* Frequencies of each id over N_DRAWS draws from the same logits. */
static void frequencies(woolly_sampler *s, const float *logits, int n, double *freq)
{
    for (int i = 0; i < n; i++)
        freq[i] = 0.0;
    for (int k = 0; k < N_DRAWS; k++) {
        const woolly_token t = woolly_sampler_sample(s, logits);
        cr_assert(t >= 0 && t < n, "sampled id %d out of range", t);
        freq[t] += 1.0 / N_DRAWS;
    }
}

static void logits_of(const double *p, int n, float *logits)
{
    for (int i = 0; i < n; i++)
        logits[i] = p[i] > 0 ? (float)log(p[i]) : -INFINITY;
}

static void expect_freqs(const double *freq, const double *want, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        cr_expect(fabs(freq[i] - want[i]) <= FREQ_TOL, "%s: id %d drawn with frequency %.4f, expected %.4f",
                  what, i, freq[i], want[i]);
}

Test(sampler, greedy_takes_the_largest_and_the_lowest_id_on_ties)
{
    woolly_sampler_params p = plain(0.0f);
    woolly_sampler *s = make(5, &p);
    const float a[5] = {0.1f, 3.0f, -2.0f, 2.9f, 0.0f};
    cr_expect_eq(woolly_sampler_sample(s, a), 1);
    const float tie[5] = {1.0f, 5.0f, 2.0f, 5.0f, 5.0f};
    cr_expect_eq(woolly_sampler_sample(s, tie), 1);
    cr_expect_eq(woolly_sample_greedy(tie, 5), 1);
    const float neg[5] = {-9.0f, -3.0f, -1.5f, -8.0f, -2.0f};
    cr_expect_eq(woolly_sampler_sample(s, neg), 2);
    woolly_sampler_close(s);
}

Test(sampler, temperature_one_follows_the_softmax)
{
    const double prob[4] = {0.1, 0.2, 0.3, 0.4};
    float logits[4];
    logits_of(prob, 4, logits);
    woolly_sampler_params p = plain(1.0f);
    woolly_sampler *s = make(4, &p);
    double f[4];
    frequencies(s, logits, 4, f);
    expect_freqs(f, prob, 4, "temperature 1");
    woolly_sampler_close(s);
}

Test(sampler, temperature_sharpens_and_flattens)
{
    const double prob[3] = {0.2, 0.3, 0.5};
    float logits[3];
    logits_of(prob, 3, logits);
    const float temps[2] = {0.5f, 2.0f};
    for (int k = 0; k < 2; k++) {
        double want[3], sum = 0;
        for (int i = 0; i < 3; i++)
            sum += want[i] = pow(prob[i], 1.0 / temps[k]);
        for (int i = 0; i < 3; i++)
            want[i] /= sum;
        woolly_sampler_params p = plain(temps[k]);
        woolly_sampler *s = make(3, &p);
        double f[3];
        frequencies(s, logits, 3, f);
        expect_freqs(f, want, 3, temps[k] < 1 ? "temperature 0.5" : "temperature 2");
        woolly_sampler_close(s);
    }
}

Test(sampler, top_k_keeps_the_k_most_likely)
{
    const double prob[5] = {0.05, 0.4, 0.1, 0.3, 0.15};
    float logits[5];
    logits_of(prob, 5, logits);
    woolly_sampler_params p = plain(1.0f);
    p.top_k = 2;
    woolly_sampler *s = make(5, &p);
    double f[5];
    frequencies(s, logits, 5, f);
    const double want[5] = {0, 0.4 / 0.7, 0, 0.3 / 0.7, 0};
    expect_freqs(f, want, 5, "top-k 2");
    woolly_sampler_close(s);
}

Test(sampler, top_k_one_is_greedy)
{
    woolly_sampler_params p = plain(1.5f);
    p.top_k = 1;
    woolly_sampler *s = make(6, &p);
    const float logits[6] = {0.5f, 0.4f, 0.45f, 0.1f, 0.49f, -1.0f};
    for (int i = 0; i < 200; i++)
        cr_assert_eq(woolly_sampler_sample(s, logits), 0);
    woolly_sampler_close(s);
}

Test(sampler, top_p_keeps_the_smallest_set_reaching_the_mass)
{
    const double prob[4] = {0.15, 0.5, 0.05, 0.3};
    float logits[4];
    logits_of(prob, 4, logits);
    woolly_sampler_params p = plain(1.0f);
    p.top_p = 0.7f; /* 0.5 + 0.3 = 0.8 >= 0.7: ids 1 and 3 */
    woolly_sampler *s = make(4, &p);
    double f[4];
    frequencies(s, logits, 4, f);
    const double want[4] = {0, 0.5 / 0.8, 0, 0.3 / 0.8};
    expect_freqs(f, want, 4, "top-p 0.7");
    woolly_sampler_close(s);
}

Test(sampler, min_p_drops_tokens_far_below_the_best)
{
    const double prob[4] = {0.5, 0.3, 0.15, 0.05};
    float logits[4];
    logits_of(prob, 4, logits);
    woolly_sampler_params p = plain(1.0f);
    p.min_p = 0.2f; /* keep p >= 0.1: ids 0, 1, 2 */
    woolly_sampler *s = make(4, &p);
    double f[4];
    frequencies(s, logits, 4, f);
    const double want[4] = {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0};
    expect_freqs(f, want, 4, "min-p 0.2");
    woolly_sampler_close(s);
}

Test(sampler, repetition_penalty_over_the_window)
{
    woolly_sampler_params p = plain(0.0f);
    p.repeat_penalty = 1.5f;
    p.repeat_last_n = 2;
    woolly_sampler *s = make(8, &p);
    const float pos[8] = {2.0f, 1.9f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f};
    cr_expect_eq(woolly_sampler_sample(s, pos), 0);
    woolly_sampler_accept(s, 0); /* 2.0 / 1.5 = 1.33 < 1.9 */
    cr_expect_eq(woolly_sampler_sample(s, pos), 1);
    woolly_sampler_accept(s, 0); /* repeated in the window: still penalized once */
    cr_expect_eq(woolly_sampler_sample(s, pos), 1);
    woolly_sampler_accept(s, 5);
    woolly_sampler_accept(s, 6); /* 0 has left the window of 2 */
    cr_expect_eq(woolly_sampler_sample(s, pos), 0);

    const float neg[8] = {-1.0f, -1.2f, -5.0f, -5.0f, -5.0f, -5.0f, -5.0f, -5.0f};
    woolly_sampler_reset(s);
    woolly_sampler_accept(s, 0); /* -1.0 * 1.5 = -1.5 < -1.2 */
    cr_expect_eq(woolly_sampler_sample(s, neg), 1);
    woolly_sampler_reset(s);
    cr_expect_eq(woolly_sampler_sample(s, neg), 0);
    woolly_sampler_close(s);
}

/* OpenAI's penalties: presence subtracts once per distinct id in the window, frequency once per
 * occurrence, on top of the repetition penalty. */
Test(sampler, presence_and_frequency_penalties)
{
    woolly_sampler_params p = plain(0.0f);
    p.presence_penalty = 0.5f;
    p.repeat_last_n = 4;
    woolly_sampler *s = make(4, &p);
    const float l[4] = {3.0f, 2.6f, 2.2f, 0.0f};
    woolly_sampler_accept(s, 0);
    woolly_sampler_accept(s, 0); /* presence counts once: 3.0 - 0.5 = 2.5 < 2.6 */
    cr_expect_eq(woolly_sampler_sample(s, l), 1);
    woolly_sampler_close(s);

    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.3f;
    s = make(4, &p);
    woolly_sampler_accept(s, 0); /* once: 3.0 - 0.3 = 2.7 > 2.6 */
    cr_expect_eq(woolly_sampler_sample(s, l), 0);
    woolly_sampler_accept(s, 0); /* twice: 3.0 - 0.6 = 2.4 < 2.6 */
    cr_expect_eq(woolly_sampler_sample(s, l), 1);
    woolly_sampler_accept(s, 1);
    woolly_sampler_accept(s, 1); /* the window of 4 holds 0, 0, 1, 1: 2.4 vs 2.0 vs 2.2 */
    cr_expect_eq(woolly_sampler_sample(s, l), 0);
    woolly_sampler_accept(s, 3);
    woolly_sampler_accept(s, 3); /* the window holds 1, 1, 3, 3: 0 is back at 3.0 */
    cr_expect_eq(woolly_sampler_sample(s, l), 0);
    woolly_sampler_close(s);

    p.frequency_penalty = -1.0f; /* a negative penalty favours repeats */
    s = make(4, &p);
    woolly_sampler_accept(s, 2);
    cr_expect_eq(woolly_sampler_sample(s, l), 2);
    woolly_sampler_close(s);

    p.frequency_penalty = NAN;
    woolly_error err = {{0}};
    cr_expect_null(woolly_sampler_create(4, &p, &err));
    cr_expect(strstr(err.msg, "frequency penalty") != NULL, "%s", err.msg);
}

/* logit_bias: added before everything else (penalties included), in greedy picks, in draws and in the
 * probability vector speculative decoding compares; set again, it replaces; bad biases are refused. */
Test(sampler, logit_bias_shifts_logits_before_the_other_steps)
{
    woolly_sampler_params p = plain(0.0f);
    woolly_sampler *s = make(4, &p);
    const float l[4] = {3.0f, 2.6f, 2.2f, 0.0f};
    const woolly_token up = 3, down = 0;
    const float plus = 3.5f, minus = -100.0f;
    cr_assert_eq(woolly_sampler_set_logit_bias(s, &up, &plus, 1), 0, "%s", woolly_last_error());
    cr_expect_eq(woolly_sampler_sample(s, l), 3, "0 + 3.5 beats 3.0");
    cr_assert_eq(woolly_sampler_set_logit_bias(s, &down, &minus, 1), 0, "%s", woolly_last_error());
    cr_expect_eq(woolly_sampler_sample(s, l), 1,
                 "the new bias replaced the old: 0 is banned, 3 is back at 0");
    cr_assert_eq(woolly_sampler_set_logit_bias(s, NULL, NULL, 0), 0, "%s", woolly_last_error());
    cr_expect_eq(woolly_sampler_sample(s, l), 0, "no bias");
    woolly_sampler_close(s);

    /* before the repetition penalty: 2.6 + 0.6 = 3.2 > 1.75, then divided by 2 = 1.6 < 1.75 (the penalty
     * first would leave 1.3 + 0.6 = 1.9) */
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 4;
    s = make(4, &p);
    const float l2[4] = {1.75f, 2.6f, 0.0f, 0.0f};
    const woolly_token one = 1;
    const float small = 0.6f;
    cr_assert_eq(woolly_sampler_set_logit_bias(s, &one, &small, 1), 0);
    cr_expect_eq(woolly_sampler_sample(s, l2), 1);
    woolly_sampler_accept(s, 1);
    cr_expect_eq(woolly_sampler_sample(s, l2), 0, "the bias came after the penalty");
    woolly_sampler_close(s);

    /* draws and probabilities: log-probabilities 0.5 / 0.5 / 0 / 0 shifted by log(3) on id 1 -> 1/4, 3/4 */
    p = plain(1.0f);
    s = make(4, &p);
    const double want[4] = {0.25, 0.75, 0.0, 0.0};
    const double half[4] = {0.5, 0.5, 0.0, 0.0};
    float lg[4];
    logits_of(half, 4, lg);
    const float ln3 = logf(3.0f);
    cr_assert_eq(woolly_sampler_set_logit_bias(s, &one, &ln3, 1), 0);
    double freq[4];
    frequencies(s, lg, 4, freq);
    expect_freqs(freq, want, 4, "biased draws");
    float probs[4];
    woolly_error err = {{0}};
    cr_assert_eq(woolly_sampler_probs(s, lg, probs, &err), 0, "%s", err.msg);
    for (int i = 0; i < 4; i++)
        cr_expect(fabs(probs[i] - want[i]) < 1e-6, "probs[%d] = %g, expected %g", i, probs[i], want[i]);

    static const struct {
        woolly_token ids[2];
        float bias[2];
        int32_t n;
        const char *message;
    } BAD[] = {{{4, 0}, {1.0f, 0}, 1, "token id 4 is outside [0, 4)"},
               {{-1, 0}, {1.0f, 0}, 1, "token id -1 is outside"},
               {{2, 2}, {1.0f, 2.0f}, 2, "token 2 is given twice"},
               {{1, 0}, {NAN, 0}, 1, "not a finite number"},
               {{1, 0}, {INFINITY, 0}, 1, "not a finite number"},
               {{1, 0}, {1.0f, 0}, -1, "-1 biases"}};
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        cr_expect_eq(woolly_sampler_set_logit_bias(s, BAD[i].ids, BAD[i].bias, BAD[i].n), -1, "case %zu", i);
        cr_expect(strstr(woolly_last_error(), BAD[i].message) != NULL, "case %zu: %s", i,
                  woolly_last_error());
    }
    /* a refused set leaves the earlier biases, and the penalties' scratch counts, as they were */
    cr_assert_eq(woolly_sampler_probs(s, lg, probs, &err), 0, "%s", err.msg);
    cr_expect(fabs(probs[1] - 0.75) < 1e-6, "probs[1] = %g after the refused sets", probs[1]);
    woolly_sampler_close(s);

    /* the duplicate check borrows the penalties' per-id counts: a refused set must leave them at 0, or the
     * frequency penalty of a token in the window would count the duplicates too (2 - 0.5 x 1, not x 3) */
    p = plain(1.0f);
    p.frequency_penalty = 0.5f;
    p.repeat_last_n = 4;
    s = make(2, &p);
    const woolly_token twice[2] = {1, 1};
    const float b2[2] = {0.0f, 0.0f};
    cr_expect_eq(woolly_sampler_set_logit_bias(s, twice, b2, 2), -1);
    woolly_sampler_accept(s, 1);
    const float l3[2] = {0.0f, 2.0f};
    cr_assert_eq(woolly_sampler_probs(s, l3, probs, &err), 0, "%s", err.msg);
    const double p1 = 1.0 / (1.0 + exp(-1.5));
    cr_expect(fabs(probs[1] - p1) < 1e-6, "probs[1] = %g, expected %g", probs[1], p1);
    woolly_sampler_close(s);
}

Test(sampler, the_seed_makes_draws_reproducible)
{
    float logits[64];
    for (int i = 0; i < 64; i++)
        logits[i] = (float)sin(i * 0.7);
    woolly_sampler_params p = plain(1.0f);
    woolly_token a[100], b[100], c[100];
    woolly_sampler *s = make(64, &p);
    for (int i = 0; i < 100; i++)
        a[i] = woolly_sampler_sample(s, logits);
    woolly_sampler_reset(s);
    for (int i = 0; i < 100; i++)
        b[i] = woolly_sampler_sample(s, logits);
    woolly_sampler_close(s);
    p.seed = 4321;
    s = make(64, &p);
    for (int i = 0; i < 100; i++)
        c[i] = woolly_sampler_sample(s, logits);
    woolly_sampler_close(s);
    cr_expect(memcmp(a, b, sizeof a) == 0, "the same seed gave different draws");
    cr_expect(memcmp(a, c, sizeof a) != 0, "different seeds gave the same 100 draws");
}

Test(sampler, large_vocabulary_with_all_filters)
{
    enum { V = 50000 };
    static float logits[V];
    for (int i = 0; i < V; i++)
        logits[i] = (float)(5.0 * sin(i * 0.013) + (i == 31337 ? 20.0 : 0.0));
    woolly_sampler_params p = woolly_sampler_default_params();
    p.seed = 7;
    woolly_sampler *s = make(V, &p);
    for (int i = 0; i < 50; i++) {
        const woolly_token t = woolly_sampler_sample(s, logits);
        cr_assert_eq(t, 31337, "a logit 20 above the rest must win under the defaults, got %d", t);
    }
    woolly_sampler_close(s);
}

Test(sampler, bad_parameters_are_named)
{
    static const struct {
        const char *field;
        float temp, top_p, min_p, penalty;
        int top_k, last_n;
    } BAD[] = {
        {"temperature", -1.0f, 1.0f, 0.0f, 1.0f, 0, 64},   {"top-p", 1.0f, 0.0f, 0.0f, 1.0f, 0, 64},
        {"top-p", 1.0f, 1.5f, 0.0f, 1.0f, 0, 64},          {"min-p", 1.0f, 1.0f, -0.1f, 1.0f, 0, 64},
        {"repeat penalty", 1.0f, 1.0f, 0.0f, 0.0f, 0, 64}, {"top-k", 1.0f, 1.0f, 0.0f, 1.0f, -3, 64},
        {"repeat-last-n", 1.0f, 1.0f, 0.0f, 1.0f, 0, -1},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        woolly_sampler_params p = plain(BAD[i].temp);
        p.top_p = BAD[i].top_p;
        p.min_p = BAD[i].min_p;
        p.repeat_penalty = BAD[i].penalty;
        p.top_k = BAD[i].top_k;
        p.repeat_last_n = BAD[i].last_n;
        woolly_error err = {{0}};
        cr_expect_null(woolly_sampler_create(10, &p, &err), "case %zu accepted", i);
        cr_expect(strstr(err.msg, BAD[i].field) != NULL, "message '%s' does not name %s", err.msg,
                  BAD[i].field);
    }
    woolly_sampler_params p = plain(1.0f);
    woolly_error err = {{0}};
    cr_expect_null(woolly_sampler_create(0, &p, &err));
    cr_expect(strstr(err.msg, "vocabulary") != NULL, "%s", err.msg);
}

/* Logits with a NaN or +infinity (a damaged model file, an overflow) cannot be sampled: the sampler says
 * so, greedy or not, and its probability view refuses them; -infinity masks a token and is fine. */
Test(sampler, logits_that_broke_down_are_an_error)
{
    static const struct {
        float bad;
        const char *named;
    } CASES[] = {{NAN, "NaN"}, {INFINITY, "+infinity"}};
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++)
        for (int greedy = 0; greedy < 2; greedy++) {
            woolly_sampler_params p = plain(greedy ? 0.0f : 1.0f);
            woolly_sampler *s = make(4, &p);
            const float masked[4] = {-INFINITY, 0.5f, 2.0f, -INFINITY};
            const woolly_token t = woolly_sampler_sample(s, masked);
            cr_expect(greedy ? t == 2 : t == 1 || t == 2, "sampled %d, a masked token", t);
            cr_expect_null(woolly_sampler_error(s), "-infinity masks a token: %s", woolly_sampler_error(s));
            const float broken[4] = {0.5f, 2.0f, CASES[k].bad, 1.0f};
            woolly_sampler_sample(s, broken);
            const char *why = woolly_sampler_error(s);
            cr_assert_not_null(why, "%s logits sampled without an error", CASES[k].named);
            cr_expect(strstr(why, CASES[k].named) && strstr(why, "token 2"), "%s", why);
            cr_expect_str_eq(woolly_sampler_broken(s), why);
            cr_expect_null(woolly_sampler_grammar_error(s), "not the grammar's failure");
            woolly_sampler_sample(s, masked);
            cr_expect_not_null(woolly_sampler_error(s), "the error stays until a reset");
            woolly_sampler_reset(s);
            cr_expect_null(woolly_sampler_error(s));
            float probs[4];
            woolly_error err = {{0}};
            cr_expect_eq(woolly_sampler_probs(s, broken, probs, &err), -1);
            cr_expect(strstr(err.msg, CASES[k].named) != NULL, "%s", err.msg);
            woolly_sampler_close(s);
        }
}
