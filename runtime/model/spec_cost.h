/* The cost model of speculative decoding's adaptive draft length (speculative.c): what one target pass
 * over n tokens (the pending token and n - 1 guesses) costs against a one-token pass, and what one draft
 * guess costs, learned from the times measured as speculation runs on the machine at hand.
 *
 * Until a step size is measured, a written-in table (llama-1b's shape, 2 threads) gives the shape of the
 * costs. Each measured size corrects it: its correction factor is the measured time over the table's
 * cost, and a size not measured yet takes the factor of the measured sizes around it (interpolated
 * between the nearest below and above, else the nearest), so one measurement moves every estimate the
 * same way and the ratios stay the table's, and more measurements replace the table's shape by the
 * machine's. The times go in through spec_cost_observe*, so that a test gives them without a clock. */
#ifndef WOOLLY_MODEL_SPEC_COST_H
#define WOOLLY_MODEL_SPEC_COST_H

#include <stdbool.h>
#include <stdint.h>

enum { SPEC_COST_MAX_N = 65 }; /* the largest verification pass: the pending token and 64 guesses */

typedef struct spec_cost {
    double t[SPEC_COST_MAX_N + 1]; /* [n]: the smoothed seconds of a target pass over n tokens */
    int32_t n_obs[SPEC_COST_MAX_N + 1];
    double draft_prior;  /* one draft guess in one-token target passes, before it is measured */
    double draft_t;      /* the smoothed seconds of one draft guess */
    int32_t draft_n_obs;
} spec_cost;

/* draft_prior: the draft's guess against a target token before measuring (0 without a draft model). */
void spec_cost_init(spec_cost *c, double draft_prior);

/* The table's cost of a pass over n tokens, in one-token passes (the prior). */
double spec_cost_prior(int32_t n);

/* A target pass over n tokens (1 .. SPEC_COST_MAX_N) took `seconds`; other n, or a time that is not
 * positive, are ignored. */
void spec_cost_observe(spec_cost *c, int32_t n, double seconds);

/* Drafting k guesses took `seconds` (their draft-model evaluations and sampling). */
void spec_cost_observe_draft(spec_cost *c, int32_t k, double seconds);

/* A pass over n tokens in one-token passes: measured where it can be, the prior's shape where not. */
double spec_cost_pass(const spec_cost *c, int32_t n);

/* One draft guess in one-token target passes. */
double spec_cost_draft(const spec_cost *c);

/* The number of guesses (0 .. kmax) with the most expected tokens per unit of cost when each guess is
 * accepted with probability alpha (the step stops at the first rejection, and the target adds a token
 * of its own); 0 when no number beats a plain one-token pass. with_draft: the guesses come from the
 * draft model (they cost its guesses too), else they are free (prompt lookup). */
int32_t spec_cost_best_len(const spec_cost *c, double alpha, int32_t kmax, bool with_draft);

/* Whether the one-token pass, the unit of every ratio, has been measured often enough to trust. */
bool spec_cost_has_unit(const spec_cost *c);

#endif
