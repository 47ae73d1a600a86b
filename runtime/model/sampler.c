#include "sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "context.h"
#include "model.h"

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
    woolly_token *bias_id; /* the logit biases: bias[i] added to token bias_id[i]'s logit */
    float *bias;
    int32_t n_bias;

    /* the grammar, when one constrains the output */
    woolly_gmatch *gm;
    const woolly_vocab_trie *trie;
    const woolly_tokenizer *tok;
    int32_t *eog; /* the end-of-generation ids */
    candidate *eog_cand; /* their candidates, kept aside while the allowed ones are compacted */
    int32_t n_eog;
    char *text; /* one token's bytes */
    size_t text_cap;
    bool grammar_done;
    char broken[200]; /* why the logits cannot be sampled (woolly_sampler_error), "" while they can */
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
    free(s->bias_id);
    free(s->bias);
    woolly_gmatch_free(s->gm);
    free(s->eog);
    free(s->eog_cand);
    free(s->text);
    free(s);
}

int woolly_sampler_set_grammar_vocab(woolly_sampler *s, const woolly_tokenizer *t, const woolly_vocab_trie *trie,
                                     const woolly_grammar *g, woolly_error *err)
{
    woolly_gmatch_free(s->gm);
    s->gm = NULL;
    s->grammar_done = false;
    if (!g)
        return 0;
    if (woolly_vocab_trie_n_vocab(trie) != s->n_vocab || woolly_tokenizer_n_vocab(t) != s->n_vocab)
        return woolly_fail(err, "grammar: the vocabulary has %d tokens, the sampler %d",
                           (int)woolly_vocab_trie_n_vocab(trie), (int)s->n_vocab);
    free(s->eog);
    free(s->eog_cand);
    free(s->text);
    s->n_eog = 0;
    s->eog = malloc(sizeof *s->eog * (size_t)s->n_vocab);
    s->eog_cand = malloc(sizeof *s->eog_cand * (size_t)s->n_vocab);
    s->text_cap = woolly_tokenizer_max_token_bytes(t) + 1;
    s->text = malloc(s->text_cap);
    if (!s->eog || !s->eog_cand || !s->text)
        return woolly_fail(err, "grammar: out of memory for a sampler's grammar");
    if (!(s->gm = woolly_gmatch_open(g, err))) /* its message: memory, or a start too ambiguous */
        return -1;
    for (int32_t i = 0; i < s->n_vocab; i++)
        if (woolly_tokenizer_is_eog(t, i))
            s->eog[s->n_eog++] = i;
    s->trie = trie;
    s->tok = t;
    return 0;
}

int woolly_sampler_set_grammar(woolly_sampler *s, const woolly_model *m, const woolly_grammar *g)
{
    woolly_error err = {{0}};
    const woolly_vocab_trie *trie = g ? woolly_model_vocab_trie(m, &err) : NULL;
    if ((g && !trie) || woolly_sampler_set_grammar_vocab(s, m->tok, trie, g, &err)) {
        woolly_set_last_error(&err);
        return -1;
    }
    return 0;
}

bool woolly_sampler_grammar_done(const woolly_sampler *s)
{
    return s->gm && s->grammar_done;
}

const char *woolly_sampler_grammar_error(const woolly_sampler *s)
{
    return s->gm ? woolly_gmatch_failure(s->gm) : NULL;
}

const char *woolly_sampler_broken(const woolly_sampler *s)
{
    return s->broken[0] ? s->broken : NULL;
}

const char *woolly_sampler_error(const woolly_sampler *s)
{
    return s->broken[0] ? s->broken : woolly_sampler_grammar_error(s);
}

int woolly_sampler_set_logit_bias(woolly_sampler *s, const woolly_token *ids, const float *bias, int32_t n)
{
    woolly_error err = {{0}};
    if (n < 0 || (n > 0 && (!ids || !bias))) {
        woolly_fail(&err, "logit bias: %d biases (the arrays %s)", (int)n, n < 0 ? "given" : "missing");
        woolly_set_last_error(&err);
        return -1;
    }
    for (int32_t i = 0; i < n && !err.msg[0]; i++) {
        if (ids[i] < 0 || ids[i] >= s->n_vocab)
            woolly_fail(&err, "logit bias: token id %d is outside [0, %d)", (int)ids[i], (int)s->n_vocab);
        else if (!isfinite(bias[i]))
            woolly_fail(&err, "logit bias: the bias of token %d is %g, not a finite number", (int)ids[i],
                        (double)bias[i]);
        else if (s->count[ids[i]]++) /* count is all 0 between penalty passes: a scratch set of ids */
            woolly_fail(&err, "logit bias: token %d is given twice", (int)ids[i]);
    }
    for (int32_t i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < s->n_vocab)
            s->count[ids[i]] = 0;
    woolly_token *new_id = NULL;
    float *new_bias = NULL;
    if (!err.msg[0] && n > 0 &&
        (!(new_id = malloc(sizeof *new_id * (size_t)n)) ||
         !(new_bias = malloc(sizeof *new_bias * (size_t)n))))
        woolly_fail(&err, "logit bias: out of memory for %d biases", (int)n);
    if (err.msg[0]) {
        free(new_id);
        free(new_bias);
        woolly_set_last_error(&err);
        return -1;
    }
    for (int32_t i = 0; i < n; i++)
        new_id[i] = ids[i], new_bias[i] = bias[i];
    free(s->bias_id);
    free(s->bias);
    s->bias_id = new_id, s->bias = new_bias, s->n_bias = n;
    return 0;
}

void woolly_sampler_reset(woolly_sampler *s)
{
    s->n_history = 0;
    s->head = 0;
    s->broken[0] = 0;
    seed_rng(s);
    if (s->gm) {
        woolly_gmatch_reset(s->gm);
        s->grammar_done = false;
    }
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

/* Step 0 (c[id] at index id). */
static void apply_bias(woolly_sampler *s)
{
    for (int32_t i = 0; i < s->n_bias; i++)
        s->cand[s->bias_id[i]].v += s->bias[i];
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

/* Keeps the candidates the grammar allows (c[id] still at index id), in id order; returns their count,
 * 0 if none. */
static int32_t keep_grammar_tokens(woolly_sampler *s)
{
    int32_t n_allowed = 0;
    const uint32_t *mask = woolly_gmatch_mask(s->gm, s->trie, &n_allowed);
    if (!mask)
        return 0;
    candidate *c = s->cand;
    const bool can_end = woolly_gmatch_can_end(s->gm);
    if (can_end)
        for (int32_t i = 0; i < s->n_eog; i++)
            s->eog_cand[i] = c[s->eog[i]];
    int32_t k = 0;
    const int32_t words = (s->n_vocab + 31) / 32;
    for (int32_t w = 0; w < words && k < n_allowed; w++)
        for (uint32_t bits = mask[w]; bits; bits &= bits - 1)
            c[k++] = c[w * 32 + __builtin_ctz(bits)]; /* k <= the id: never overwrites one not yet read */
    if (can_end)
        for (int32_t i = 0; i < s->n_eog; i++)
            c[k++] = s->eog_cand[i];
    return k;
}

/* The grammar moves on with the picked token (an end-of-generation token ends it). */
static woolly_token grammar_pick(woolly_sampler *s, woolly_token t)
{
    for (int32_t i = 0; i < s->n_eog; i++)
        if (s->eog[i] == t) {
            s->grammar_done = true;
            return t;
        }
    int64_t len = woolly_token_bytes(s->tok, t, s->text, s->text_cap);
    if (len < 0 || (size_t)len > s->text_cap || woolly_gmatch_accept(s->gm, s->text, (size_t)len))
        s->grammar_done = true; /* not reachable from a mask; stops rather than leave the language */
    return t;
}

static woolly_token sample_candidates(woolly_sampler *s, int32_t n);

/* Fills the candidates from the logits; false, saying why in s->broken, when one is NaN or +infinity
 * (-infinity is a token masked out, as callers of the API may write it). A model whose weights hold such a
 * value (a damaged file) or whose arithmetic overflowed gives nothing but noise from then on, which sampling
 * would hand on as text. */
static bool take_logits(woolly_sampler *s, const float *logits)
{
    candidate *c = s->cand;
    const int32_t n = s->n_vocab;
    bool usable = true;
    for (int32_t i = 0; i < n; i++) {
        c[i] = (candidate){logits[i], i};
        usable &= logits[i] < INFINITY; /* false for NaN too */
    }
    if (usable)
        return true;
    int32_t bad = 0;
    while (logits[bad] < INFINITY)
        bad++;
    snprintf(
        s->broken, sizeof s->broken,
        "the model's logits hold %s (token %d): its weights or its arithmetic give non-finite numbers, so "
        "no token it picks means anything (a damaged model file?)",
        isnan(logits[bad]) ? "NaN" : "+infinity", (int)bad);
    return false;
}

/* What a sample returns where the output must end: the end-of-generation token a grammar knows, else 0. */
static woolly_token end_token(const woolly_sampler *s)
{
    return s->n_eog ? s->eog[0] : 0;
}

woolly_token woolly_sampler_sample(woolly_sampler *s, const float *logits)
{
    int32_t n = s->n_vocab;
    if (!take_logits(s, logits))
        return end_token(s); /* the caller ends the output: woolly_sampler_error says why */
    apply_bias(s);
    apply_penalty(s);
    if (!s->gm)
        return sample_candidates(s, n);
    if (s->grammar_done) /* the grammar ended the output already: only an end can follow */
        return end_token(s);
    n = keep_grammar_tokens(s);
    if (n == 0) { /* nothing allowed: end the output rather than leave the language */
        s->grammar_done = true;
        return end_token(s);
    }
    return grammar_pick(s, sample_candidates(s, n));
}

/* Steps 3 to 6 over c[0..n) (temp > 0; c[best] the largest): leaves the kept candidates in c[0..n) with
 * unnormalized probabilities, the largest first, and returns their count and their sum in *sum. */
static int32_t keep_candidates(woolly_sampler *s, int32_t n, int32_t best, double *sum_out)
{
    candidate *c = s->cand;
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
    *sum_out = sum;
    return n;
}

static int32_t best_candidate(const candidate *c, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (before(&c[i], &c[best]))
            best = i;
    return best;
}

/* Steps 2 to 7 over c[0..n). */
static woolly_token sample_candidates(woolly_sampler *s, int32_t n)
{
    candidate *c = s->cand;
    const int32_t best = best_candidate(c, n);
    if (s->p.temp == 0.0f)
        return c[best].id;
    double sum;
    n = keep_candidates(s, n, best, &sum);
    double r = next_uniform(s) * sum;
    for (int32_t i = 0; i < n; i++) {
        r -= c[i].v;
        if (r < 0.0)
            return c[i].id;
    }
    return c[n - 1].id; /* rounding left r a hair above zero */
}

int woolly_sampler_probs(woolly_sampler *s, const float *logits, float *probs, woolly_error *err)
{
    if (s->gm)
        return woolly_fail(err,
                           "sampler: no probability vector under a grammar (its allowed tokens depend on "
                           "the tokens it accepts as it samples)");
    candidate *c = s->cand;
    const int32_t n_vocab = s->n_vocab;
    if (!take_logits(s, logits))
        return woolly_fail(err, "sampler: %s", s->broken);
    apply_bias(s);
    apply_penalty(s);
    for (int32_t i = 0; i < n_vocab; i++)
        probs[i] = 0.0f;
    const int32_t best = best_candidate(c, n_vocab);
    if (s->p.temp == 0.0f) {
        probs[c[best].id] = 1.0f;
        return 0;
    }
    double sum;
    const int32_t n = keep_candidates(s, n_vocab, best, &sum);
    for (int32_t i = 0; i < n; i++)
        probs[c[i].id] = (float)(c[i].v / sum);
    return 0;
}

woolly_token woolly_sampler_draw(woolly_sampler *s, const float *w, int32_t n)
{
    double sum = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < n; i++)
        if (w[i] > 0.0f) {
            sum += w[i];
            last = i;
        }
    if (last < 0)
        return -1;
    double r = next_uniform(s) * sum;
    for (int32_t i = 0; i < n; i++) {
        if (w[i] <= 0.0f)
            continue;
        r -= w[i];
        if (r < 0.0)
            return i;
    }
    return last; /* rounding left r a hair above zero */
}

double woolly_sampler_uniform(woolly_sampler *s)
{
    return next_uniform(s);
}

const woolly_sampler_params *woolly_sampler_get_params(const woolly_sampler *s)
{
    return &s->p;
}

bool woolly_sampler_has_grammar(const woolly_sampler *s)
{
    return s->gm != NULL;
}
