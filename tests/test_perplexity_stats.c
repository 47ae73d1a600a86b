/* The arithmetic of `woolly perplexity` (runtime/cli/perplexity_stats.h) on inputs whose answers are
 * known in closed form, and its progress bar's text. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_progress.h"
#include "perplexity_stats.h"

#define EXACT 1e-15

Test(perplexity_stats, log_softmax_is_normalized_and_shift_invariant)
{
    const float z[4] = {0.0f, 1.0f, 2.0f, 3.0f};
    double lp[4];
    cr_expect_eq(ppl_log_softmax(z, 4, lp), 3);
    const double lse = log(1.0 + exp(1.0) + exp(2.0) + exp(3.0));
    double total = 0.0;
    for (int i = 0; i < 4; i++) {
        cr_expect(fabs(lp[i] - (z[i] - lse)) < EXACT, "lp[%d] = %.17g", i, lp[i]);
        total += exp(lp[i]);
    }
    cr_expect(fabs(total - 1.0) < EXACT);

    /* Logits far beyond exp's range give the same distribution as their shifted copy. */
    const float big[4] = {1000.0f, 1001.0f, 1002.0f, 1003.0f};
    double lp_big[4];
    ppl_log_softmax(big, 4, lp_big);
    for (int i = 0; i < 4; i++)
        cr_expect(fabs(lp_big[i] - lp[i]) < 1e-12, "lp_big[%d] = %.17g, lp = %.17g", i, lp_big[i], lp[i]);

    /* Ties: the first of the largest. */
    const float tie[3] = {0.5f, 2.0f, 2.0f};
    double lp_tie[3];
    cr_expect_eq(ppl_log_softmax(tie, 3, lp_tie), 1);
    cr_expect_eq(lp_tie[1], lp_tie[2]);
}

Test(perplexity_stats, chunking_follows_llama_cpp)
{
    ppl_chunking c;
    woolly_error e = {{0}};
    cr_assert_eq(ppl_chunking_plan(1000, 128, 0, &c, &e), 0, "%s", e.msg);
    cr_expect_eq(c.n_ctx, 128);
    cr_expect_eq(c.n_chunks, 7); /* whole chunks only */
    cr_expect_eq(c.first, 64);
    cr_expect_eq(c.n_scored, 63);
    cr_assert_eq(ppl_chunking_plan(1000, 128, 3, &c, &e), 0);
    cr_expect_eq(c.n_chunks, 3);
    cr_assert_eq(ppl_chunking_plan(1000, 9, 0, &c, &e), 0); /* odd: rows 4..7 predict tokens 5..8 */
    cr_expect_eq(c.first, 4);
    cr_expect_eq(c.n_scored, 4);
    cr_assert_eq(ppl_chunking_plan(128, 128, 0, &c, &e), 0); /* exactly one chunk is enough */
    cr_expect_eq(c.n_chunks, 1);

    cr_expect_eq(ppl_chunking_plan(127, 128, 0, &c, &e), -1);
    cr_expect(strstr(e.msg, "too little text") && strstr(e.msg, "127 tokens"), "%s", e.msg);
    cr_expect_eq(ppl_chunking_plan(1000, PPL_MIN_CTX - 1, 0, &c, &e), -1);
    cr_expect(strstr(e.msg, "too small"), "%s", e.msg);
}

Test(perplexity_stats, perplexity_and_its_standard_error)
{
    /* NLLs 1, 2, 3, 4: mean 2.5, E[x^2] - E[x]^2 = 7.5 - 6.25 = 1.25, stderr sqrt(1.25 / 3). */
    ppl_moments m = {0};
    for (int i = 1; i <= 4; i++)
        ppl_moments_add(&m, i);
    cr_expect(fabs(ppl_moments_mean(&m) - 2.5) < EXACT);
    cr_expect(fabs(ppl_moments_stderr(&m) - sqrt(1.25 / 3.0)) < EXACT);
    const ppl_estimate e = ppl_estimate_of(&m);
    cr_expect(fabs(e.ppl - exp(2.5)) < 1e-12 * exp(2.5));
    cr_expect(fabs(e.err - exp(2.5) * sqrt(1.25 / 3.0)) < 1e-12 * exp(2.5));
    cr_expect_eq(e.n, 4);

    /* One value, or values without spread: no error rather than a NaN. */
    ppl_moments one = {0};
    ppl_moments_add(&one, 2.0);
    cr_expect_eq(ppl_moments_stderr(&one), 0.0);
    ppl_moments flat = {0};
    for (int i = 0; i < 5; i++)
        ppl_moments_add(&flat, 0.1);
    cr_expect_eq(ppl_moments_stderr(&flat), 0.0);
}

Test(perplexity_stats, percentiles_interpolate_between_neighbours)
{
    const double v[11] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    cr_expect(fabs(ppl_percentile(v, 11, 0.5) - 5.0) < EXACT);
    cr_expect(fabs(ppl_percentile(v, 11, 0.99) - 9.9) < 1e-12);
    cr_expect_eq(ppl_percentile(v, 11, 1.0), 10.0);
    cr_expect_eq(ppl_percentile(v, 11, 0.0), 0.0);
    const double even[4] = {1, 2, 3, 10};
    cr_expect(fabs(ppl_percentile(even, 4, 0.5) - 2.5) < EXACT); /* the mean of the middle two */
    cr_expect_eq(ppl_percentile(even, 0, 0.5), 0.0);
}

Test(perplexity_stats, kl_divergence_of_known_distributions)
{
    /* p = (1/2, 1/2), q = (9/10, 1/10): KL(p || q) = 1/2 ln(5/9) + 1/2 ln 5. */
    const float p[2] = {0.0f, 0.0f};
    const float q[2] = {(float)log(0.9), (float)log(0.1)};
    double scratch[4];
    const kl_position k = kl_score(p, q, 2, 1, scratch);
    const double want = 0.5 * log(5.0 / 9.0) + 0.5 * log(5.0); /* to the float rounding of q's logits */
    cr_expect(fabs(k.kl - want) < 1e-6, "KL %.9g, expected %.9g", k.kl, want);
    cr_expect(fabs(k.nll_base - log(2.0)) < EXACT);
    cr_expect(fabs(k.nll - log(10.0)) < 1e-6);
    cr_expect(k.same_top, "both rank token 0 first (p's tie goes to the first)");

    const float r[2] = {(float)log(0.1), (float)log(0.9)};
    cr_expect(!kl_score(q, r, 2, 0, scratch).same_top);

    /* A distribution against itself: exactly 0. */
    const float z[5] = {0.3f, -1.0f, 2.5f, 0.0f, 1.0f};
    double s5[10];
    const kl_position self = kl_score(z, z, 5, 2, s5);
    cr_expect_eq(self.kl, 0.0);
    cr_expect_eq(self.nll, self.nll_base);
    cr_expect(self.same_top);
}

Test(perplexity_stats, kl_summary_matches_llama_cpp_formulas)
{
    /* Positions with known NLLs and KLs; the ratio's error is llama.cpp's sqrt(e^2 + e_b^2 - 2 cov). */
    const double nll[6] = {2.0, 2.5, 1.0, 3.0, 2.2, 1.7}, nll_base[6] = {1.9, 2.6, 0.9, 2.7, 2.2, 1.5};
    const double kl[6] = {0.01, 0.03, 0.0, 0.2, 0.05, 0.02};
    kl_accumulator a;
    woolly_error e = {{0}};
    cr_assert_eq(kl_accumulator_init(&a, 6, &e), 0);
    for (int i = 0; i < 6; i++) {
        const kl_position p = {.kl = kl[i], .nll = nll[i], .nll_base = nll_base[i], .same_top = i != 3};
        kl_accumulator_add(&a, &p);
    }
    kl_summary s;
    cr_assert_eq(kl_summarize(&a, &s, &e), 0);
    double sa = 0, sb = 0, sab = 0, sa2 = 0, sb2 = 0, sk = 0, sk2 = 0;
    for (int i = 0; i < 6; i++) {
        sa += nll[i], sb += nll_base[i], sab += nll[i] * nll_base[i];
        sa2 += nll[i] * nll[i], sb2 += nll_base[i] * nll_base[i];
        sk += kl[i], sk2 += kl[i] * kl[i];
    }
    const double n = 6, ma = sa / n, mb = sb / n;
    const double ea = sqrt((sa2 / n - ma * ma) / (n - 1)), eb = sqrt((sb2 / n - mb * mb) / (n - 1));
    const double cov = (sab / n - ma * mb) / (n - 1);
    const double ln_err = sqrt(ea * ea + eb * eb - 2 * cov);
    cr_expect(fabs(s.ln_ratio - (ma - mb)) < 1e-14);
    cr_expect(fabs(s.ln_ratio_err - ln_err) < 1e-12, "%.17g vs %.17g", s.ln_ratio_err, ln_err);
    cr_expect(fabs(s.ratio - exp(ma - mb)) < 1e-14);
    cr_expect(fabs(s.ratio_err - exp(ma - mb) * ln_err) < 1e-12);
    cr_expect(fabs(s.ppl.ppl - exp(ma)) < 1e-12 && fabs(s.ppl_base.ppl - exp(mb)) < 1e-12);
    cr_expect(fabs(s.kl_mean - sk / n) < EXACT);
    cr_expect(fabs(s.kl_err - sqrt((sk2 / n - (sk / n) * (sk / n)) / (n - 1))) < EXACT);
    cr_expect(fabs(s.kl_median - 0.025) < EXACT); /* sorted: 0, .01, .02, .03, .05, .2 */
    cr_expect(fabs(s.kl_p99 - (0.05 + 0.95 * (0.2 - 0.05))) < 1e-14);
    cr_expect_eq(s.kl_max, 0.2);
    cr_expect(fabs(s.same_top - 5.0 / 6.0) < EXACT);
    cr_expect(fabs(s.same_top_err - sqrt(5.0 / 6.0 * (1.0 / 6.0) / 5.0)) < EXACT);
    cr_expect_eq(s.n, 6);
    kl_accumulator_free(&a);
}

Test(perplexity_stats, progress_bar_text)
{
    char buf[160];
    /* 300 of 1000 tokens in 2 s: 150 tokens/s, 700 left take 4.67 s. */
    cli_progress_format(buf, sizeof buf, 300, 1000, 2.0, "chunk", 3, 10, "tokens");
    cr_expect_str_eq(buf, "[#######.................]  30%  chunk 3/10  150.0 tokens/s  0:05 left");
    cli_progress_format(buf, sizeof buf, 1000, 1000, 4.0, "chunk", 10, 10, "tokens");
    cr_expect(strstr(buf, "[########################] 100%") && strstr(buf, "0:00 left"), "%s", buf);
    cli_progress_format(buf, sizeof buf, 0, 1000, 0.0, "chunk", 1, 10, "tokens");
    cr_expect(strstr(buf, "--:-- left"), "no rate yet: %s", buf);
    cli_progress_format(buf, sizeof buf, 1, 10000, 1.0, "chunk", 1, 10, "tokens");
    cr_expect(strstr(buf, "2:46:39 left"), "hours: %s", buf);
}
