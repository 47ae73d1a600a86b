/* Speculative decoding's cost model (spec_cost.h). */
#include "spec_cost.h"

#include <math.h>
#include <string.h>

enum { UNIT_MIN_OBS = 3 };

/* Weight of a new time in the smoothed one: about the last five passes of a size count, so that the
 * estimate follows a context that grows (attention's share) and a machine that gets busier. */
#define SMOOTH 0.2
/* A time above this many times the estimate counts as this much: one pass preempted on a shared machine
 * must not price a size out for good (a size that is not chosen is not measured again). */
#define OUTLIER 3.0

double spec_cost_prior(int32_t n)
{
    /* llama-1b, 2 threads, as first measured (issue 56): 1.06x for 2 tokens, 1.12x for 4, 1.35x for 8,
     * 2.38x for 16. */
    const int32_t k = n - 1;
    return 1.0 + 0.05 * (k < 7 ? k : 7) + 0.09 * (k > 7 ? k - 7 : 0);
}

void spec_cost_init(spec_cost *c, double draft_prior)
{
    memset(c, 0, sizeof *c);
    c->draft_prior = draft_prior;
}

static void smooth(double *t, int32_t *n_obs, double seconds)
{
    if (!(seconds > 0.0) || !isfinite(seconds))
        return;
    if (*n_obs == 0)
        *t = seconds;
    else
        *t += SMOOTH * ((seconds < OUTLIER * *t ? seconds : OUTLIER * *t) - *t);
    if (*n_obs < INT32_MAX)
        (*n_obs)++;
}

void spec_cost_observe(spec_cost *c, int32_t n, double seconds)
{
    if (n >= 1 && n <= SPEC_COST_MAX_N)
        smooth(&c->t[n], &c->n_obs[n], seconds);
}

void spec_cost_observe_draft(spec_cost *c, int32_t k, double seconds)
{
    if (k >= 1)
        smooth(&c->draft_t, &c->draft_n_obs, seconds / k);
}

/* The measured time over the prior's cost at n: measured where n was, interpolated between the nearest
 * measured sizes around it, or the nearest one's; 0 when nothing is measured. */
static double factor(const spec_cost *c, int32_t n)
{
    if (c->n_obs[n])
        return c->t[n] / spec_cost_prior(n);
    int32_t lo = n - 1, hi = n + 1;
    while (lo >= 1 && !c->n_obs[lo])
        lo--;
    while (hi <= SPEC_COST_MAX_N && !c->n_obs[hi])
        hi++;
    const bool has_lo = lo >= 1, has_hi = hi <= SPEC_COST_MAX_N;
    if (!has_lo && !has_hi)
        return 0.0;
    const double f_lo = has_lo ? c->t[lo] / spec_cost_prior(lo) : 0.0,
                 f_hi = has_hi ? c->t[hi] / spec_cost_prior(hi) : 0.0;
    if (!has_lo)
        return f_hi;
    if (!has_hi)
        return f_lo;
    return f_lo + (f_hi - f_lo) * (double)(n - lo) / (double)(hi - lo);
}

double spec_cost_pass(const spec_cost *c, int32_t n)
{
    if (n <= 1)
        return 1.0;
    if (n > SPEC_COST_MAX_N)
        n = SPEC_COST_MAX_N;
    const double f1 = factor(c, 1), fn = factor(c, n);
    if (!(f1 > 0.0) || !(fn > 0.0))
        return spec_cost_prior(n) / spec_cost_prior(1);
    return fn * spec_cost_prior(n) / (f1 * spec_cost_prior(1));
}

double spec_cost_draft(const spec_cost *c)
{
    const double f1 = factor(c, 1);
    if (c->draft_n_obs == 0 || !(f1 > 0.0))
        return c->draft_prior;
    return c->draft_t / (f1 * spec_cost_prior(1));
}

int32_t spec_cost_best_len(const spec_cost *c, double alpha, int32_t kmax, bool with_draft)
{
    if (kmax > SPEC_COST_MAX_N - 1)
        kmax = SPEC_COST_MAX_N - 1;
    const double draft = with_draft ? spec_cost_draft(c) : 0.0;
    int32_t best_k = 0;
    double best = 1.0; /* no guesses: one token per one-token pass */
    for (int32_t k = 1; k <= kmax; k++) {
        /* Expected tokens: the accepted guesses (stopping at the first rejection) plus the target's own. */
        const double tokens = alpha < 1.0 ? (1.0 - pow(alpha, k + 1)) / (1.0 - alpha) : k + 1.0;
        const double rate = tokens / (spec_cost_pass(c, k + 1) + draft * k);
        if (rate > best) {
            best = rate;
            best_k = k;
        }
    }
    return best_k;
}

bool spec_cost_has_unit(const spec_cost *c)
{
    return c->n_obs[1] >= UNIT_MIN_OBS;
}
