/* The arithmetic of `woolly perplexity`, apart from the command so that the tests check it directly.
 *
 * Chunking and scoring follow llama.cpp's perplexity tool, so that the two print comparable numbers on
 * the same model and text: the text's tokens (BOS first when the vocabulary asks for one) are cut into
 * chunks of n_ctx tokens, each chunk is evaluated from an empty cache with its first token replaced by
 * BOS (for such vocabularies), and only the second half is scored: the logits of rows first = n_ctx/2
 * .. n_ctx-2 predict tokens first+1 .. n_ctx-1, so n_ctx - 1 - first tokens per chunk.
 *
 * Perplexity = exp(mean NLL) over every scored token; its standard error is ppl times the standard error
 * of the mean NLL, sqrt((E[nll^2] - E[nll]^2) / (n - 1)). KL divergence is per scored position,
 * sum_i p_base(i) (log p_base(i) - log p(i)), with the same standard error of its mean. All of it in
 * double, from the float32 logits. */
#ifndef WOOLLY_CLI_PERPLEXITY_STATS_H
#define WOOLLY_CLI_PERPLEXITY_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

/* The smallest chunk: half of it is context, and at least three positions are scored. */
#define PPL_MIN_CTX 8

/* out[i] = logits[i] - log(sum_j exp(logits[j])), in double (shifted by the largest logit, so that no
 * exponential overflows). Returns the index of the largest logit, the first one on ties. */
int32_t ppl_log_softmax(const float *logits, int32_t n, double *out);

typedef struct ppl_chunking {
    int32_t n_ctx;    /* tokens per chunk */
    int32_t n_chunks; /* chunks evaluated */
    int32_t first;    /* logit row of the first scored position: n_ctx / 2 */
    int32_t n_scored; /* positions scored per chunk: n_ctx - 1 - first */
} ppl_chunking;

/* As many whole chunks of n_ctx tokens as the text holds, at most max_chunks (0: no limit). Fails with
 * a message when the text is shorter than one chunk or n_ctx is below PPL_MIN_CTX. */
int ppl_chunking_plan(int64_t n_tokens, int32_t n_ctx, int32_t max_chunks, ppl_chunking *c,
                      woolly_error *err);

/* Running sums of a quantity, for its mean and the standard error of that mean. */
typedef struct ppl_moments {
    double sum, sum2;
    int64_t n;
} ppl_moments;

void ppl_moments_add(ppl_moments *m, double x);
double ppl_moments_mean(const ppl_moments *m);
/* sqrt((E[x^2] - E[x]^2) / (n - 1)); 0 with fewer than two values or no spread. */
double ppl_moments_stderr(const ppl_moments *m);

typedef struct ppl_estimate {
    double ppl, err; /* exp(mean NLL) and its standard error */
    double mean_nll; /* nats per token */
    int64_t n;       /* scored tokens */
} ppl_estimate;

ppl_estimate ppl_estimate_of(const ppl_moments *nll);

/* The value below which `fraction` of n sorted values lie, interpolated linearly between neighbours
 * (fraction 0.5 is the median, 1 the maximum). 0 for no values. */
double ppl_percentile(const double *sorted, int64_t n, double fraction);

/* One scored position compared with the base's. */
typedef struct kl_position {
    double kl;       /* sum_i p_base(i) (log p_base(i) - log p(i)) */
    double nll_base; /* -log p_base(target) */
    double nll;      /* -log p(target) */
    bool same_top;   /* both rank the same token first */
} kl_position;

/* Compares two rows of n_vocab logits; scratch holds 2 * n_vocab doubles. */
kl_position kl_score(const float *base_logits, const float *logits, int32_t n_vocab, int32_t target,
                     double *scratch);

typedef struct kl_accumulator {
    ppl_moments nll, nll_base, kl;
    ppl_moments nll_diff; /* nll - nll_base per position: the spread of ln(PPL/PPL base) */
    int64_t n_same_top;
    double *kl_values; /* every position's KL, for the percentiles */
    int64_t cap;
} kl_accumulator;

/* Room for n positions; fails only when out of memory. */
int kl_accumulator_init(kl_accumulator *a, int64_t n, woolly_error *err);
void kl_accumulator_add(kl_accumulator *a, const kl_position *p);
void kl_accumulator_free(kl_accumulator *a);

typedef struct kl_summary {
    ppl_estimate ppl, ppl_base;
    double ln_ratio, ln_ratio_err; /* ln(PPL / PPL base) */
    double ratio, ratio_err;       /* PPL / PPL base */
    double kl_mean, kl_err, kl_median, kl_p99, kl_max;
    double same_top, same_top_err; /* fraction of positions where the top tokens agree */
    int64_t n;
} kl_summary;

/* The statistics of the positions added so far (sorts a copy of the KL values; fails only when out of
 * memory). The error of ln(PPL/PPL base) is the standard error of the mean of nll - nll_base, which is
 * llama.cpp's sqrt(err^2 + err_base^2 - 2 cov) written so that it cannot go negative by rounding. */
int kl_summarize(const kl_accumulator *a, kl_summary *s, woolly_error *err);

#endif
