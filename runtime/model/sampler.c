#include "sampler.h"

#include <math.h>
#include <stdlib.h>

typedef struct candidate {
    float v; /* logit, then probability */
    int32_t id;
} candidate;

struct woolly_sampler {
    woolly_sampler_params p;
    int32_t n_vocab;
    candidate *cand;  /* [n_vocab] */
    uint32_t *count;  /* [n_vocab] occurrences in the window during a penalty pass, 0 otherwise */
    int32_t *history; /* ring of the last repeat_last_n accepted tokens */
    int32_t n_history, head;
    uint64_t rng; /* xorshift64* state, never 0 */
};

woolly_sampler_params woolly_sampler_default_params(void)
{
    return (woolly_sampler_params){
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .seed = 0,
        .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f,
    };
}

int woolly_sampler_params_check(const woolly_sampler_params *p, woolly_error *err)
{
    if (!(p->temp >= 0.0f) || !isfinite(p->temp))
        return woolly_fail(err, "temperature %g must be a finite number >= 0", (double)p->temp);
    if (p->top_k < 0)
        return woolly_fail(err, "top-k %d must be >= 0 (0 turns it off)", (int)p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return woolly_fail(err, "top-p %g must be in (0, 1] (1 turns it off)", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return woolly_fail(err, "min-p %g must be in [0, 1] (0 turns it off)", (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty))
        return woolly_fail(err, "repeat penalty %g must be a finite number > 0 (1 turns it off)",
                           (double)p->repeat_penalty);
    if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
        return woolly_fail(err, "presence penalty %g and frequency penalty %g must be finite numbers",
                           (double)p->presence_penalty, (double)p->frequency_penalty);
    if (p->repeat_last_n < 0 || p->repeat_last_n > (1 << 20))
        return woolly_fail(err, "repeat-last-n %d must be in [0, %d]", (int)p->repeat_last_n, 1 << 20);
    return 0;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void seed_rng(woolly_sampler *s)
{
    s->rng = splitmix64(s->p.seed);
    if (!s->rng)
        s->rng = 0x9E3779B97F4A7C15ull;
}

/* Uniform in [0, 1) with 53 random bits. */
static double next_uniform(woolly_sampler *s)
{
    uint64_t x = s->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->rng = x;
    return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

woolly_sampler *woolly_sampler_create(int32_t n_vocab, const woolly_sampler_params *p, woolly_error *err)
{
    if (n_vocab < 1) {
        woolly_fail(err, "sampler: vocabulary size %d must be >= 1", (int)n_vocab);
        return NULL;
    }
    if (woolly_sampler_params_check(p, err))
        return NULL;
    woolly_sampler *s = calloc(1, sizeof *s);
    if (!s) {
        woolly_fail(err, "sampler: out of memory");
        return NULL;
    }
    s->p = *p;
    s->n_vocab = n_vocab;
    s->cand = malloc(sizeof *s->cand * (size_t)n_vocab);
    s->count = calloc((size_t)n_vocab, sizeof *s->count);
    s->history = malloc(sizeof *s->history * (size_t)(p->repeat_last_n > 0 ? p->repeat_last_n : 1));
    if (!s->cand || !s->count || !s->history) {
        woolly_sampler_close(s);
        woolly_fail(err, "sampler: out of memory for a vocabulary of %d", (int)n_vocab);
        return NULL;
    }
    seed_rng(s);
    return s;
}

void woolly_sampler_close(woolly_sampler *s)
{
    if (!s)
        return;
    free(s->cand);
    free(s->count);
    free(s->history);
    free(s);
}

void woolly_sampler_reset(woolly_sampler *s)
{
    s->n_history = 0;
    s->head = 0;
    seed_rng(s);
}

void woolly_sampler_accept(woolly_sampler *s, woolly_token t)
{
    if (s->p.repeat_last_n == 0 || t < 0 || t >= s->n_vocab)
        return;
    s->history[s->head] = t;
    s->head = (s->head + 1) % s->p.repeat_last_n;
    if (s->n_history < s->p.repeat_last_n)
        s->n_history++;
}

woolly_token woolly_sample_greedy(const float *logits, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

/* a ranks before b: larger value, then lower id. */
static inline int before(const candidate *a, const candidate *b)
{
    return a->v > b->v || (a->v == b->v && a->id < b->id);
}

/* Min-heap on rank (the worst candidate at the root). */
static void sift_down(candidate *h, int32_t n, int32_t i)
{
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && before(&h[c], &h[c + 1]))
            c++;
        if (!before(&h[i], &h[c]))
            return;
        candidate t = h[i];
        h[i] = h[c];
        h[c] = t;
        i = c;
    }
}

/* Moves the k best of c[0..n) to c[0..k), sorted best first, in O(n log k) without allocating. */
static void select_top(candidate *c, int32_t n, int32_t k)
{
    for (int32_t i = k / 2 - 1; i >= 0; i--)
        sift_down(c, k, i);
    for (int32_t i = k; i < n; i++) {
        if (before(&c[i], &c[0])) {
            c[0] = c[i];
            sift_down(c, k, 0);
        }
    }
    for (int32_t end = k - 1; end > 0; end--) { /* pop the worst to the back: best ends up first */
        candidate t = c[0];
        c[0] = c[end];
        c[end] = t;
        sift_down(c, end, 0);
    }
}

static void apply_penalty(woolly_sampler *s)
{
    const woolly_sampler_params *p = &s->p;
    if ((p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f && p->frequency_penalty == 0.0f) ||
        s->n_history == 0)
        return;
    for (int32_t i = 0; i < s->n_history; i++)
        s->count[s->history[i]]++;
    for (int32_t i = 0; i < s->n_history; i++) {
        const int32_t id = s->history[i];
        if (s->count[id] == 0) /* an id met before in this loop: already penalized */
            continue;
        float *v = &s->cand[id].v;
        *v = *v > 0.0f ? *v / p->repeat_penalty : *v * p->repeat_penalty;
        *v -= p->presence_penalty + p->frequency_penalty * (float)s->count[id];
        s->count[id] = 0;
    }
}

woolly_token woolly_sampler_sample(woolly_sampler *s, const float *logits)
{
    candidate *c = s->cand;
    int32_t n = s->n_vocab;
    for (int32_t i = 0; i < n; i++)
        c[i] = (candidate){logits[i], i};
    apply_penalty(s);

    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (before(&c[i], &c[best]))
            best = i;
    if (s->p.temp == 0.0f)
        return c[best].id;

    const float temp = s->p.temp;
    if (s->p.min_p > 0.0f) { /* p_i / p_max = exp((v_i - v_max) / T) >= min_p; compact in place */
        const float vmax = c[best].v, cut = vmax + temp * logf(s->p.min_p);
        int32_t kept = 0;
        for (int32_t i = 0; i < n; i++)
            if (c[i].v >= cut || i == best)
                c[kept++] = c[i];
        n = kept;
    }
    const int32_t k = s->p.top_k > 0 && s->p.top_k < n ? s->p.top_k : n;
    select_top(c, n, k);
    n = k;

    double sum = 0.0;
    const float vmax = c[0].v;
    for (int32_t i = 0; i < n; i++) {
        c[i].v = expf((c[i].v - vmax) / temp);
        sum += c[i].v;
    }
    if (s->p.top_p < 1.0f) {
        double cum = 0.0;
        int32_t i = 0;
        while (i < n) {
            cum += c[i].v;
            i++;
            if (cum >= s->p.top_p * sum)
                break;
        }
        n = i;
        sum = cum;
    }
    double r = next_uniform(s) * sum;
    for (int32_t i = 0; i < n; i++) {
        r -= c[i].v;
        if (r < 0.0)
            return c[i].id;
    }
    return c[n - 1].id; /* rounding left r a hair above zero */
}
