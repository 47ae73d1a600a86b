#include "perplexity_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int32_t ppl_log_softmax(const float *logits, int32_t n, double *out)
{
    int32_t top = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[top])
            top = i;
    const double max = logits[top];
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++)
        sum += exp((double)logits[i] - max);
    const double lse = max + log(sum);
    for (int32_t i = 0; i < n; i++)
        out[i] = (double)logits[i] - lse;
    return top;
}

int ppl_chunking_plan(int64_t n_tokens, int32_t n_ctx, int32_t max_chunks, ppl_chunking *c, woolly_error *err)
{
    if (n_ctx < PPL_MIN_CTX)
        return woolly_fail(err,
                           "-c %d is too small: a chunk needs at least %d tokens (half of it is context)",
                           n_ctx, PPL_MIN_CTX);
    if (n_tokens < n_ctx)
        return woolly_fail(
            err,
            "too little text: it has %lld tokens, and one chunk of -c %d needs %d (give a longer "
            "text or a smaller -c)",
            (long long)n_tokens, n_ctx, n_ctx);
    int64_t n_chunks = n_tokens / n_ctx;
    if (max_chunks > 0 && n_chunks > max_chunks)
        n_chunks = max_chunks;
    if (n_chunks > INT32_MAX)
        n_chunks = INT32_MAX;
    c->n_ctx = n_ctx;
    c->n_chunks = (int32_t)n_chunks;
    c->first = n_ctx / 2;
    c->n_scored = n_ctx - 1 - c->first;
    return 0;
}

void ppl_moments_add(ppl_moments *m, double x)
{
    m->sum += x;
    m->sum2 += x * x;
    m->n++;
}

double ppl_moments_mean(const ppl_moments *m)
{
    return m->n > 0 ? m->sum / (double)m->n : 0.0;
}

double ppl_moments_stderr(const ppl_moments *m)
{
    if (m->n < 2)
        return 0.0;
    const double mean = m->sum / (double)m->n;
    const double var = m->sum2 / (double)m->n - mean * mean;
    return var > 0.0 ? sqrt(var / (double)(m->n - 1)) : 0.0;
}

ppl_estimate ppl_estimate_of(const ppl_moments *nll)
{
    ppl_estimate e;
    e.mean_nll = ppl_moments_mean(nll);
    e.ppl = exp(e.mean_nll);
    e.err = e.ppl * ppl_moments_stderr(nll); /* d exp(x) = exp(x) dx */
    e.n = nll->n;
    return e;
}

double ppl_percentile(const double *sorted, int64_t n, double fraction)
{
    if (n <= 0)
        return 0.0;
    if (fraction <= 0.0)
        return sorted[0];
    if (fraction >= 1.0)
        return sorted[n - 1];
    const double at = fraction * (double)(n - 1);
    const int64_t i = (int64_t)at;
    const double w = at - (double)i;
    return i + 1 < n ? (1.0 - w) * sorted[i] + w * sorted[i + 1] : sorted[i];
}

kl_position kl_score(const float *base_logits, const float *logits, int32_t n_vocab, int32_t target,
                     double *scratch)
{
    double *lp_base = scratch, *lp = scratch + n_vocab;
    const int32_t top_base = ppl_log_softmax(base_logits, n_vocab, lp_base);
    const int32_t top = ppl_log_softmax(logits, n_vocab, lp);
    double kl = 0.0;
    for (int32_t i = 0; i < n_vocab; i++)
        kl += exp(lp_base[i]) * (lp_base[i] - lp[i]);
    return (kl_position){
        .kl = kl, .nll_base = -lp_base[target], .nll = -lp[target], .same_top = top == top_base};
}

int kl_accumulator_init(kl_accumulator *a, int64_t n, woolly_error *err)
{
    memset(a, 0, sizeof *a);
    a->kl_values = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!a->kl_values)
        return woolly_fail(err, "out of memory for the KL divergence of %lld positions", (long long)n);
    a->cap = n;
    return 0;
}

void kl_accumulator_add(kl_accumulator *a, const kl_position *p)
{
    if (a->kl.n < a->cap)
        a->kl_values[a->kl.n] = p->kl;
    ppl_moments_add(&a->kl, p->kl);
    ppl_moments_add(&a->nll, p->nll);
    ppl_moments_add(&a->nll_base, p->nll_base);
    ppl_moments_add(&a->nll_diff, p->nll - p->nll_base);
    a->n_same_top += p->same_top;
}

void kl_accumulator_free(kl_accumulator *a)
{
    free(a->kl_values);
    a->kl_values = NULL;
}

static int by_value(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int kl_summarize(const kl_accumulator *a, kl_summary *s, woolly_error *err)
{
    const int64_t n = a->kl.n < a->cap ? a->kl.n : a->cap;
    double *sorted = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!sorted)
        return woolly_fail(err, "out of memory for the KL percentiles of %lld positions", (long long)n);
    memcpy(sorted, a->kl_values, sizeof(double) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, by_value);

    memset(s, 0, sizeof *s);
    s->n = a->kl.n;
    s->ppl = ppl_estimate_of(&a->nll);
    s->ppl_base = ppl_estimate_of(&a->nll_base);
    s->ln_ratio = s->ppl.mean_nll - s->ppl_base.mean_nll;
    s->ln_ratio_err = ppl_moments_stderr(&a->nll_diff);
    s->ratio = exp(s->ln_ratio);
    s->ratio_err = s->ratio * s->ln_ratio_err;
    s->kl_mean = ppl_moments_mean(&a->kl);
    s->kl_err = ppl_moments_stderr(&a->kl);
    s->kl_median = ppl_percentile(sorted, n, 0.5);
    s->kl_p99 = ppl_percentile(sorted, n, 0.99);
    s->kl_max = ppl_percentile(sorted, n, 1.0);
    if (s->n > 0) {
        const double p = (double)a->n_same_top / (double)s->n;
        s->same_top = p;
        s->same_top_err = s->n > 1 ? sqrt(p * (1.0 - p) / (double)(s->n - 1)) : 0.0;
    }
    free(sorted);
    return 0;
}
