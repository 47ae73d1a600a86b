/* The adaptive draft length's cost model (spec_cost.h), with times given by the test instead of a clock:
 * the written-in prior until something is measured, one measurement scaling every size alike, measured
 * sizes replacing the prior's shape (and interpolated between), the chosen length following the
 * measured costs (this machine's llama-1b figures choose shorter drafts than the prior), a preempted
 * pass clipped, the draft's guess priced by its measured time; and through woolly_spec's clock seam, a
 * run whose passes cost the same at every size drafts long while one whose passes cost their token
 * count drafts only its probes, both with the plain greedy text. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "spec_cost.h"
#include "speculative.h"
#include "testutil.h"
#include "woolly.h"

static void observe_ratios(spec_cost *c, const int32_t *n, const double *ratio, int count, double unit_s)
{
    for (int rep = 0; rep < 3; rep++) {
        spec_cost_observe(c, 1, unit_s);
        for (int i = 0; i < count; i++)
            spec_cost_observe(c, n[i], ratio[i] * unit_s);
    }
}

Test(spec_cost, unmeasured_costs_are_the_prior)
{
    spec_cost c;
    spec_cost_init(&c, 0.25);
    cr_assert_float_eq(spec_cost_pass(&c, 1), 1.0, 1e-12);
    for (int32_t n = 2; n <= SPEC_COST_MAX_N; n++)
        cr_assert_float_eq(spec_cost_pass(&c, n), spec_cost_prior(n) / spec_cost_prior(1), 1e-12, "n %d", n);
    cr_assert_float_eq(spec_cost_draft(&c), 0.25, 1e-12);
    cr_assert(!spec_cost_has_unit(&c));
}

Test(spec_cost, one_measured_size_keeps_the_prior_ratios)
{
    /* Only 5-token passes measured: the one-token pass is inferred from them by the prior's shape. */
    spec_cost c;
    spec_cost_init(&c, 0.0);
    spec_cost_observe(&c, 5, 0.040);
    for (int32_t n = 2; n <= SPEC_COST_MAX_N; n++)
        cr_assert_float_eq(spec_cost_pass(&c, n), spec_cost_prior(n) / spec_cost_prior(1), 1e-9, "n %d", n);
}

/* llama-1b, 2 threads, on the development machine: a pass of n tokens against a one-token pass. */
static const int32_t MEASURED_N[] = {2, 3, 4, 8, 16};
static const double MEASURED_RATIO[] = {1.41, 1.50, 1.50, 2.79, 4.80};

Test(spec_cost, measured_sizes_replace_the_prior)
{
    spec_cost c;
    spec_cost_init(&c, 0.0);
    observe_ratios(&c, MEASURED_N, MEASURED_RATIO, 5, 0.1);
    cr_assert(spec_cost_has_unit(&c));
    for (int i = 0; i < 5; i++)
        cr_assert_float_eq(spec_cost_pass(&c, MEASURED_N[i]), MEASURED_RATIO[i], 1e-9, "n %d",
                           MEASURED_N[i]);
    /* Between measured sizes: between their costs, rising with n. */
    double last = spec_cost_pass(&c, 8);
    for (int32_t n = 9; n < 16; n++) {
        const double x = spec_cost_pass(&c, n);
        cr_assert(x > last && x < 4.80, "n %d: %g after %g", n, x, last);
        last = x;
    }
    /* Past the largest measured size: its correction on the prior's shape. */
    cr_assert_float_eq(spec_cost_pass(&c, 32), 4.80 / spec_cost_prior(16) * spec_cost_prior(32), 1e-9);
}

Test(spec_cost, the_chosen_length_follows_the_measured_costs)
{
    spec_cost c;
    spec_cost_init(&c, 0.0);
    /* The prior rates long drafts cheap: at acceptance 0.8, 7 free guesses (lookup) pay best. */
    cr_assert_eq(spec_cost_best_len(&c, 0.8, 16, false), 7);
    /* Measured: 3 and 4 tokens cost the same, 8 nearly twice as much: 3 guesses pay best. */
    observe_ratios(&c, MEASURED_N, MEASURED_RATIO, 5, 0.1);
    cr_assert_eq(spec_cost_best_len(&c, 0.8, 16, false), 3);
    /* A cap below the best is the cap; no guesses when acceptance is nil. */
    cr_assert_eq(spec_cost_best_len(&c, 0.8, 2, false), 2);
    cr_assert_eq(spec_cost_best_len(&c, 0.0, 16, false), 0);
    /* A pass that costs its token count never pays for guesses that can fail. */
    spec_cost lin;
    spec_cost_init(&lin, 0.0);
    for (int32_t n = 1; n <= SPEC_COST_MAX_N; n++)
        spec_cost_observe(&lin, n, 0.01 * n);
    cr_assert_eq(spec_cost_best_len(&lin, 0.95, 64, false), 0);
    /* A pass that costs the same at every size: as many as allowed. */
    spec_cost flat;
    spec_cost_init(&flat, 0.0);
    for (int32_t n = 1; n <= SPEC_COST_MAX_N; n++)
        spec_cost_observe(&flat, n, 0.01);
    cr_assert_eq(spec_cost_best_len(&flat, 0.9, 16, false), 16);
}

Test(spec_cost, the_draft_guess_is_priced_by_its_time)
{
    spec_cost c;
    spec_cost_init(&c, 0.05); /* the size ratio: a draft 20 times smaller */
    observe_ratios(&c, MEASURED_N, MEASURED_RATIO, 5, 0.1);
    cr_assert_float_eq(spec_cost_draft(&c), 0.05, 1e-12);
    const int32_t cheap = spec_cost_best_len(&c, 0.8, 16, true);
    cr_assert(cheap >= 1, "a cheap draft at acceptance 0.8 pays");
    /* Its guesses measured at 0.8 of a target token (4 guesses in 0.32 s): they cost more than they save. */
    for (int i = 0; i < 3; i++)
        spec_cost_observe_draft(&c, 4, 0.32);
    cr_assert_float_eq(spec_cost_draft(&c), 0.8, 1e-9);
    cr_assert_eq(spec_cost_best_len(&c, 0.8, 16, true), 0);
    /* Lookup's guesses cost nothing whatever the draft costs. */
    cr_assert_eq(spec_cost_best_len(&c, 0.8, 16, false), 3);
}

Test(spec_cost, bad_times_are_ignored_and_outliers_clipped)
{
    spec_cost c;
    spec_cost_init(&c, 0.0);
    spec_cost_observe(&c, 0, 1.0);
    spec_cost_observe(&c, SPEC_COST_MAX_N + 1, 1.0);
    spec_cost_observe(&c, 2, -1.0);
    spec_cost_observe(&c, 2, NAN);
    spec_cost_observe(&c, 2, 0.0);
    spec_cost_observe_draft(&c, 0, 1.0);
    spec_cost zero;
    spec_cost_init(&zero, 0.0);
    cr_assert(!memcmp(&c, &zero, sizeof c), "nothing was recorded");
    spec_cost_observe(&c, 1, 1.0);
    spec_cost_observe(&c, 1, 1000.0); /* preempted: counts as at most 3x the estimate */
    cr_assert(c.t[1] <= 1.0 + 0.2 * 2.0 + 1e-12, "%g", c.t[1]);
}

/* ---- the seam: woolly_spec with a clock that stands still and given costs ---------------------------- */

static double still_clock(void *arg)
{
    (void)arg;
    return 42.0;
}

enum { N_GEN = 40 };

/* Greedy decoding of stories260K drafting for itself (most guesses pass), with the given pass costs and
 * free draft guesses; returns the stats after checking the text against plain greedy decoding. */
static woolly_spec_stats run_with_costs(double (*cost_of)(int32_t n))
{
    woolly_model *m = woolly_model_open(tu_data("models/stories260K.gguf"));
    cr_assert(m != NULL, "%s", woolly_last_error());
    woolly_context_params cp = woolly_context_default_params();
    cp.n_ctx = 128;
    cp.n_batch = 32;
    cp.n_threads = 1;
    woolly_context *plain = woolly_context_open(m, &cp);
    cp.logits_all = true;
    woolly_context *tc = woolly_context_open(m, &cp);
    cp.logits_all = false;
    woolly_context *dc = woolly_context_open(m, &cp);
    cr_assert(plain && tc && dc, "%s", woolly_last_error());
    const char *text = "Once upon a time, there was a little girl named Lily. She";
    woolly_token prompt[64], want[N_GEN], got[N_GEN];
    const int32_t n_prompt = woolly_model_tokenize(m, text, strlen(text), true, false, prompt, 64);
    cr_assert(n_prompt > 0 && n_prompt <= 64);
    woolly_sampler_params sp = woolly_sampler_default_params();
    sp.temp = 0.0f;
    woolly_sampler *s = woolly_sampler_open(m, &sp);
    cr_assert_eq(woolly_eval(plain, prompt, n_prompt), 0, "%s", woolly_last_error());
    for (int32_t i = 0; i < N_GEN; i++) {
        want[i] = woolly_sampler_sample(s, woolly_get_logits(plain, -1));
        woolly_sampler_accept(s, want[i]);
        cr_assert_eq(woolly_eval(plain, &want[i], 1), 0, "%s", woolly_last_error());
    }
    woolly_sampler_reset(s);
    woolly_spec_params p = woolly_spec_default_params();
    p.draft_max = 16;
    woolly_spec *spec = woolly_spec_open(tc, dc, &p);
    cr_assert(spec != NULL, "%s", woolly_last_error());
    woolly_spec_set_clock(spec, still_clock, NULL);
    spec_cost *c = woolly_spec_cost(spec);
    c->draft_prior = 0.0;
    for (int rep = 0; rep < 3; rep++)
        for (int32_t n = 1; n <= SPEC_COST_MAX_N; n++)
            spec_cost_observe(c, n, cost_of(n));
    cr_assert_eq(woolly_spec_begin(spec, prompt, n_prompt), 0, "%s", woolly_last_error());
    for (int32_t n = 0; n < N_GEN;) {
        const int32_t k = woolly_spec_step(spec, s, got + n, N_GEN - n);
        cr_assert(k >= 1, "%s", woolly_last_error());
        n += k;
    }
    for (int32_t i = 0; i < N_GEN; i++)
        cr_assert_eq(got[i], want[i], "token %d: %d, plain greedy %d", i, got[i], want[i]);
    const woolly_spec_stats st = woolly_spec_get_stats(spec);
    woolly_spec_close(spec);
    woolly_sampler_close(s);
    woolly_context_close(dc);
    woolly_context_close(tc);
    woolly_context_close(plain);
    woolly_model_close(m);
    return st;
}

static double flat_cost(int32_t n)
{
    (void)n;
    return 0.01;
}

static double linear_cost(int32_t n)
{
    return 0.01 * n;
}

Test(spec_cost, a_spec_drafts_as_its_measured_costs_say)
{
    const woolly_spec_stats flat = run_with_costs(flat_cost), lin = run_with_costs(linear_cost);
    cr_assert(flat.n_drafted > 2 * flat.n_steps,
              "passes that cost the same at any size: long drafts (%lld drafted in %lld steps)",
              (long long)flat.n_drafted, (long long)flat.n_steps);
    /* Passes that cost their token count: only the probes, one guess each, 8 or more steps apart. */
    cr_assert(lin.n_drafted <= lin.n_steps / 8 + 1, "%lld drafted in %lld steps", (long long)lin.n_drafted,
              (long long)lin.n_steps);
    cr_assert(lin.n_steps > flat.n_steps);
}
