/* Speculative decoding (woolly.h, "speculative decoding"): guesses from a draft model or from prompt
 * lookup, checked by one forward pass of the target over the last token and the guesses, the caches
 * rolled back past the first rejected guess.
 *
 * State between steps: hist[0 .. n_hist) is the prompt and every returned token; the target's cache
 * holds all of them but the last (the pending token, evaluated at the start of the next step together
 * with that step's guesses). The draft's cache holds hist[d_off .. d_off + its n_past): it evaluates a
 * text's beginning whole, but a draft that later fell far behind (its guesses were not asked for a
 * while) restarts on the last few tokens instead of catching up on all of them, which keeps an idle
 * draft cheap; any draft context is correct, a shorter one only guesses worse.
 *
 * The number of guesses per step follows the estimated acceptance and the costs of the target's passes
 * and the draft's guesses as measured on this machine while speculation runs (spec_cost.h). */
#include "speculative.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "context.h"
#include "model.h"
#include "sampler.h"
#include "spec_cost.h"
#include "tokenizer.h"

enum {
    SPEC_DRAFT_MAX = 64,
    SPEC_LOOKUP_MAX = 16,
    VOCAB_TAIL_TOLERANCE = 128, /* trailing (special) tokens one vocabulary may have beyond the other */
    DRAFT_CATCH_UP_MAX = 64,    /* a draft this far behind restarts ... */
    DRAFT_RESTART_TOKENS = 32,  /* ... on this many of the last tokens */
    PROBE_GAP_MIN = 8,          /* steps without guesses before the source is tried again, growing ... */
    PROBE_GAP_MAX = 256,        /* ... to this while it does not pay */
    UNIT_PROBE_EVERY = 16,      /* until a one-token pass is measured, one step in this many is plain */
};

/* The weight of the past in the acceptance estimate: about the last ten steps count. */
#define ACCEPT_DECAY 0.9
/* A probe's extra cost (the draft's catch-up and guess, the longer pass) is kept to about this share
 * of the plain steps between probes. */
#define PROBE_SHARE 0.03

static double monotonic_s(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct woolly_spec {
    woolly_context *tgt, *dft;
    woolly_spec_params p;
    int32_t n_vocab, d_vocab; /* the target's and the draft's vocabulary sizes */
    woolly_token *hist;       /* [cap_hist] */
    int32_t n_hist, cap_hist;
    bool pending;        /* hist[n_hist - 1] was returned and is not in the target's cache */
    int32_t d_off;       /* the draft's cache holds hist[d_off ..] */
    bool d_whole;        /* the draft has not caught up since the text began: it evaluates all of it */
    woolly_token *guess; /* [draft_max] this step's guesses */
    bool guess_q;        /* they were drawn from the draft model's q rows (else: a point mass each) */
    float *q;            /* [draft_max][d_vocab] the draft's distributions (sampling with a draft model) */
    float *pr;           /* [n_vocab] the target's distribution at one position */
    float *resid;        /* [n_vocab] max(0, p - q) */
    woolly_batch vb;     /* the verification batch, and the prompt's chunks */
    woolly_sampler *ds;  /* the draft's sampler: the caller's parameters without penalties */
    woolly_sampler_params ds_for; /* the caller's parameters ds was made from */
    double acc, rej;              /* decayed counts of accepted guesses and of rejections */
    spec_cost cost;               /* the target's pass and the draft's guess, as measured here */
    double (*now)(void *);        /* the clock of the measurements (a seam: tests give the times) */
    void *now_arg;
    int32_t idle, probe_gap;
    bool probing;
    woolly_spec_stats st;
};

woolly_spec_params woolly_spec_default_params(void)
{
    return (woolly_spec_params){.draft_max = 8, .lookup = 0, .adaptive = true};
}

int woolly_spec_check_vocab(const woolly_model *t, const woolly_model *d, woolly_error *err)
{
    if (!t->tok || !d->tok)
        return woolly_fail(err, "speculative decoding: %s model has no vocabulary",
                           !t->tok ? "the target" : "the draft");
    const int32_t nt = woolly_tokenizer_n_vocab(t->tok), nd = woolly_tokenizer_n_vocab(d->tok);
    if (abs(nt - nd) > VOCAB_TAIL_TOLERANCE)
        return woolly_fail(err,
                           "draft model: its vocabulary has %d tokens, the target's %d (more than %d apart): "
                           "a draft needs the target's vocabulary",
                           nd, nt, VOCAB_TAIL_TOLERANCE);
    const int32_t n = nt < nd ? nt : nd;
    for (int32_t i = 0; i < n; i++) {
        const char *a = woolly_tokenizer_piece(t->tok, i), *b = woolly_tokenizer_piece(d->tok, i);
        if (strcmp(a ? a : "", b ? b : ""))
            return woolly_fail(
                err,
                "draft model: token %d is '%.40s' in the draft's vocabulary and '%.40s' in the "
                "target's: a draft needs the target's vocabulary",
                i, b ? b : "", a ? a : "");
    }
    if (woolly_tokenizer_bos(t->tok) != woolly_tokenizer_bos(d->tok) ||
        woolly_tokenizer_eos(t->tok) != woolly_tokenizer_eos(d->tok))
        return woolly_fail(err, "draft model: its BOS/EOS tokens (%d/%d) differ from the target's (%d/%d)",
                           woolly_tokenizer_bos(d->tok), woolly_tokenizer_eos(d->tok),
                           woolly_tokenizer_bos(t->tok), woolly_tokenizer_eos(t->tok));
    return 0;
}

static woolly_spec *spec_create(woolly_context *tgt, woolly_context *dft, const woolly_spec_params *p,
                                woolly_error *err)
{
    if (!tgt || !p) {
        woolly_fail(err, "speculative decoding: no target context or parameters");
        return NULL;
    }
    if (p->draft_max < 1 || p->draft_max > SPEC_DRAFT_MAX) {
        woolly_fail(err, "draft-max %d must be in [1, %d]", p->draft_max, SPEC_DRAFT_MAX);
        return NULL;
    }
    if (p->lookup < 0 || p->lookup > SPEC_LOOKUP_MAX) {
        woolly_fail(err, "lookup %d must be in [1, %d] (0 turns it off)", p->lookup, SPEC_LOOKUP_MAX);
        return NULL;
    }
    if (!dft && p->lookup == 0) {
        woolly_fail(err, "speculative decoding needs a draft model or prompt lookup (lookup > 0)");
        return NULL;
    }
    if (dft == tgt) {
        woolly_fail(err, "speculative decoding: the draft context must not be the target's");
        return NULL;
    }
    if (!tgt->params.logits_all || tgt->params.n_batch < p->draft_max + 1) {
        woolly_fail(err,
                    "speculative decoding: the target context needs logits_all and a batch of at least "
                    "draft-max + 1 = %d tokens (it has %s, n_batch %d)",
                    p->draft_max + 1, tgt->params.logits_all ? "logits_all" : "no logits_all",
                    tgt->params.n_batch);
        return NULL;
    }
    if (dft && woolly_spec_check_vocab(tgt->model, dft->model, err))
        return NULL;
    woolly_spec *s = calloc(1, sizeof *s);
    if (!s) {
        woolly_fail(err, "speculative decoding: out of memory");
        return NULL;
    }
    s->tgt = tgt;
    s->dft = dft;
    s->p = *p;
    s->n_vocab = tgt->model->cfg.n_vocab;
    s->d_vocab = dft ? dft->model->cfg.n_vocab : 0;
    s->cap_hist = tgt->params.n_ctx + 1;
    s->hist = malloc(sizeof *s->hist * (size_t)s->cap_hist);
    s->guess = malloc(sizeof *s->guess * (size_t)p->draft_max);
    s->pr = malloc(sizeof *s->pr * (size_t)s->n_vocab);
    s->resid = malloc(sizeof *s->resid * (size_t)s->n_vocab);
    if (dft)
        s->q = malloc(sizeof *s->q * (size_t)p->draft_max * (size_t)s->d_vocab);
    if (!s->hist || !s->guess || !s->pr || !s->resid || (dft && !s->q) ||
        woolly_batch_init(&s->vb, tgt->params.n_batch)) {
        woolly_spec_close(s);
        woolly_fail(err, "speculative decoding: out of memory");
        return NULL;
    }
    /* Until measured: decoding reads the weights once per token, a draft token costs the draft's share of
     * the bytes. */
    spec_cost_init(&s->cost,
                   dft ? (double)woolly_model_size(dft->model) / (double)woolly_model_size(tgt->model) : 0.0);
    s->now = monotonic_s;
    s->acc = s->rej = 1.0; /* no evidence yet: one half */
    s->probe_gap = PROBE_GAP_MIN;
    return s;
}

woolly_spec *woolly_spec_open(woolly_context *target, woolly_context *draft, const woolly_spec_params *p)
{
    woolly_error err = {{0}};
    woolly_spec *s = spec_create(target, draft, p, &err);
    if (!s)
        woolly_set_last_error(&err);
    return s;
}

void woolly_spec_close(woolly_spec *s)
{
    if (!s)
        return;
    free(s->hist);
    free(s->guess);
    free(s->q);
    free(s->pr);
    free(s->resid);
    woolly_batch_free(&s->vb);
    woolly_sampler_close(s->ds);
    free(s);
}

woolly_spec_stats woolly_spec_get_stats(const woolly_spec *s)
{
    return s->st;
}

static int draft_catch_up(woolly_spec *s, int32_t k, woolly_error *err);

static int spec_begin(woolly_spec *s, const woolly_token *ids, int32_t n, woolly_error *err)
{
    if (!ids || n < 1)
        return woolly_fail(err, "speculative decoding: nothing to begin with (%d tokens)", n);
    if (n > s->tgt->params.n_ctx)
        return woolly_fail(err, "the prompt has %d tokens, more than the context size %d (raise --ctx-size)",
                           n, s->tgt->params.n_ctx);
    /* The caches keep what the new text begins with (a chat's earlier turns); at least the last token is
     * evaluated, for its logits. */
    int32_t keep = woolly_context_n_past(s->tgt);
    keep = keep < s->n_hist ? keep : s->n_hist;
    keep = keep < n - 1 ? keep : n - 1;
    for (int32_t i = 0; i < keep; i++)
        if (s->hist[i] != ids[i]) {
            keep = i;
            break;
        }
    if (woolly_context_rewind(s->tgt, keep)) { /* a sliding window's ring moved past it: start over */
        keep = 0;
        if (woolly_context_rewind(s->tgt, 0))
            return woolly_fail(err, "speculative decoding: %s", woolly_last_error());
    }
    if (s->dft) {
        const int32_t dn = woolly_context_n_past(s->dft);
        int32_t dkeep = s->d_off > 0 ? 0 : (dn < keep ? dn : keep);
        if (woolly_context_rewind(s->dft, dkeep)) {
            dkeep = 0;
            if (woolly_context_rewind(s->dft, 0))
                return woolly_fail(err, "speculative decoding: %s", woolly_last_error());
        }
        if (dkeep == 0)
            s->d_off = 0;
        s->d_whole = true;
    }
    memcpy(s->hist, ids, sizeof *ids * (size_t)n);
    s->n_hist = n;
    s->pending = false;
    s->idle = 0;
    s->probe_gap = PROBE_GAP_MIN;
    /* In chunks that ask for the last token's logits only: logits_all would compute the rest for nothing. */
    const int32_t nb = s->tgt->params.n_batch;
    for (int32_t done = keep; done < n; done += nb) {
        const int32_t chunk = n - done < nb ? n - done : nb;
        s->vb.n_tokens = 0;
        for (int32_t i = 0; i < chunk; i++)
            woolly_batch_add(&s->vb, ids[done + i], done + i, 0, i == chunk - 1);
        if (woolly_context_decode(s->tgt, &s->vb, err))
            return -1;
    }
    /* The draft reads the prompt now, as part of the prompt's work: its first guesses need all of it, and
     * the first steps ask for guesses (the acceptance estimate starts hopeful). Left to the first step, it
     * would be counted as generation time. */
    if (s->dft && draft_catch_up(s, 1, err) < 0)
        return -1;
    return 0;
}

int woolly_spec_begin(woolly_spec *s, const woolly_token *ids, int32_t n)
{
    woolly_error err = {{0}};
    if (spec_begin(s, ids, n, &err)) {
        woolly_set_last_error(&err);
        return -1;
    }
    return 0;
}

/* How many guesses to ask for, at most kmax: the number with the most tokens per unit of cost for the
 * estimated acceptance and the measured costs, none when no number pays (then a single guess now and
 * then, a probe, keeps the estimate up to date). Until the one-token pass, every cost's unit, is
 * measured, a step now and then is a plain one. */
static int32_t choose_len(woolly_spec *s, int32_t kmax)
{
    s->probing = false;
    if (kmax < 1)
        return 0;
    if (!s->p.adaptive)
        return kmax;
    if (!spec_cost_has_unit(&s->cost) && s->st.n_steps % UNIT_PROBE_EVERY == UNIT_PROBE_EVERY - 1)
        return 0;
    const double alpha = s->acc / (s->acc + s->rej);
    const int32_t best_k = spec_cost_best_len(&s->cost, alpha, kmax, s->dft != NULL);
    if (best_k > 0) {
        s->idle = 0;
        return best_k;
    }
    if (++s->idle < s->probe_gap)
        return 0;
    s->idle = 0;
    s->probing = true;
    return 1;
}

int32_t woolly_spec_lookup(const woolly_token *hist, int32_t h, int32_t n, woolly_token *out, int32_t k)
{
    if (n < 1 || h < n + 1)
        return 0;
    const woolly_token *tail = hist + h - n;
    for (int32_t end = h - 2; end >= n - 1; end--) { /* end: the last token of an earlier occurrence */
        if (memcmp(hist + end - n + 1, tail, sizeof *tail * (size_t)n))
            continue;
        const int32_t got = h - 1 - end < k ? h - 1 - end : k;
        memcpy(out, hist + end + 1, sizeof *out * (size_t)got);
        return got;
    }
    return 0;
}

/* Guesses from the latest earlier occurrence of the last `lookup` tokens: the tokens that followed it. */
static int32_t draft_lookup(woolly_spec *s, int32_t k)
{
    return woolly_spec_lookup(s->hist, s->n_hist, s->p.lookup, s->guess, k);
}

/* Brings the draft's cache up to hist[0 .. n_hist) (restarting it when it fell far behind, or when a
 * token is outside its vocabulary), with room for k - 1 guesses after it. Its last logits are then the
 * next token's. 0 (nothing to evaluate: no guesses), >0, or -1 with a message. */
static int draft_catch_up(woolly_spec *s, int32_t k, woolly_error *err)
{
    woolly_context *d = s->dft;
    const int32_t h = s->n_hist, n_ctx = d->params.n_ctx;
    int32_t from = s->d_off + woolly_context_n_past(d);
    if ((!s->d_whole && h - from > DRAFT_CATCH_UP_MAX) || h - s->d_off + k - 1 > n_ctx) {
        woolly_context_rewind(d, 0);
        s->d_off = from = h - DRAFT_RESTART_TOKENS > 0 ? h - DRAFT_RESTART_TOKENS : 0;
    }
    for (int32_t i = from; i < h; i++)
        if (s->hist[i] >= s->d_vocab) {
            woolly_context_rewind(d, 0);
            s->d_off = from = i + 1;
        }
    if (from >= h || h - s->d_off + k - 1 > n_ctx)
        return 0;
    for (int32_t done = from; done < h;) {
        const int32_t nb = d->params.n_batch, chunk = h - done < nb ? h - done : nb;
        if (woolly_context_eval(d, s->hist + done, chunk, err))
            return -1;
        done += chunk;
    }
    s->d_whole = false;
    return 1;
}

/* The draft sampler: the caller's parameters, penalties off (their window would have to follow the
 * guesses; any draft distribution keeps the output exact, it only changes how many guesses pass). */
static int draft_sampler(woolly_spec *s, const woolly_sampler *smp, woolly_error *err)
{
    const woolly_sampler_params *p = woolly_sampler_get_params(smp);
    if (s->ds && !memcmp(&s->ds_for, p, sizeof *p))
        return 0;
    woolly_sampler_close(s->ds);
    woolly_sampler_params dp = *p;
    dp.repeat_penalty = 1.0f;
    dp.presence_penalty = dp.frequency_penalty = 0.0f;
    dp.seed = p->seed ^ 0x5DEECE66Dull;
    if (!(s->ds = woolly_sampler_create(s->d_vocab, &dp, err)))
        return -1;
    s->ds_for = *p;
    return 0;
}

/* Up to k guesses from the draft model; their count, or -1 with a message. */
static int32_t draft_model(woolly_spec *s, const woolly_sampler *smp, int32_t k, bool sampling,
                           woolly_error *err)
{
    const int rc = draft_catch_up(s, k, err);
    if (rc <= 0)
        return rc;
    if (sampling && draft_sampler(s, smp, err))
        return -1;
    for (int32_t i = 0; i < k; i++) {
        const float *logits = woolly_get_logits(s->dft, -1);
        woolly_token t;
        if (sampling) {
            float *q = s->q + (size_t)i * (size_t)s->d_vocab;
            woolly_error e = {{0}};
            if (woolly_sampler_probs(s->ds, logits, q, &e)) /* its logits broke down: a damaged draft */
                return woolly_fail(err, "speculative decoding: the draft model: %s", e.msg);
            t = woolly_sampler_draw(s->ds, q, s->d_vocab);
        } else {
            t = woolly_sample_greedy(logits, s->d_vocab);
        }
        if (t < 0 || t >= s->n_vocab) /* a trailing token the target does not have */
            return i;
        s->guess[i] = t;
        if (i + 1 < k && woolly_context_eval(s->dft, &t, 1, err))
            return -1;
    }
    return k;
}

static void push(woolly_spec *s, woolly_sampler *smp, woolly_token t, woolly_token *out, int32_t *n_out)
{
    woolly_sampler_accept(smp, t);
    s->hist[s->n_hist++] = t;
    out[(*n_out)++] = t;
}

/* Whether the step must end after t: the text may end there. */
static bool ends(const woolly_spec *s, const woolly_sampler *smp, woolly_token t)
{
    return woolly_tokenizer_is_eog(s->tgt->model->tok, t) || woolly_sampler_grammar_done(smp);
}

/* A token drawn after guess x (drawn from q, a row of n_q probabilities, or a point mass when NULL) was
 * rejected: from max(0, p - q), normalized. */
static woolly_token resample(woolly_spec *s, woolly_sampler *smp, woolly_token x, const float *q, int32_t n_q)
{
    for (int32_t y = 0; y < s->n_vocab; y++) {
        const float qy = q ? (y < n_q ? q[y] : 0.0f) : (y == x ? 1.0f : 0.0f);
        s->resid[y] = s->pr[y] > qy ? s->pr[y] - qy : 0.0f;
    }
    const woolly_token t = woolly_sampler_draw(smp, s->resid, s->n_vocab);
    return t >= 0 ? t : woolly_sampler_draw(smp, s->pr, s->n_vocab); /* p == q up to rounding */
}

/* After a probe that took probe_s seconds more than a plain step: back to short gaps if guessing pays
 * again at the acceptance estimate (a kept guess alone does not: a draft that agrees one time in three
 * keeps some), else a gap twice as long, and at least long enough that probing costs about
 * PROBE_SHARE of the time (a draft that restarts on its last tokens makes a probe cost several steps). */
static void next_probe_gap(woolly_spec *s, double probe_s, int32_t kmax)
{
    const double alpha = s->acc / (s->acc + s->rej);
    if (spec_cost_best_len(&s->cost, alpha, kmax, s->dft != NULL) > 0) {
        s->probe_gap = PROBE_GAP_MIN;
        return;
    }
    double gap = 2.0 * s->probe_gap;
    if (spec_cost_has_unit(&s->cost) && probe_s / (PROBE_SHARE * s->cost.t[1]) > gap)
        gap = probe_s / (PROBE_SHARE * s->cost.t[1]);
    s->probe_gap = gap < PROBE_GAP_MAX ? (int)gap : PROBE_GAP_MAX;
}

static int32_t spec_step(woolly_spec *s, woolly_sampler *smp, woolly_token *out, int32_t cap,
                         woolly_error *err)
{
    if (!smp || !out || cap < 1)
        return woolly_fail(err, "speculative decoding: a step needs a sampler and room for a token (cap %d)",
                           cap);
    if (s->n_hist == 0)
        return woolly_fail(err, "speculative decoding: woolly_spec_begin first");
    const bool sampling = woolly_sampler_get_params(smp)->temp > 0.0f;
    if (sampling && woolly_sampler_has_grammar(smp))
        return woolly_fail(err, "speculative decoding: with a grammar, sample greedily (temperature 0)");
    int32_t n_out = 0;
    if (!s->pending) { /* the first token, from the prompt's logits */
        const woolly_token t = woolly_sampler_sample(smp, woolly_get_logits(s->tgt, -1));
        if (woolly_sampler_broken(smp))
            return woolly_fail(err, "speculative decoding: %s", woolly_sampler_broken(smp));
        push(s, smp, t, out, &n_out);
        s->pending = true;
        return 1;
    }
    const int32_t n_past = s->n_hist - 1, room = s->tgt->params.n_ctx - n_past;
    if (room < 1)
        return 0;
    int32_t kmax = s->p.draft_max < cap - 1 ? s->p.draft_max : cap - 1;
    kmax = kmax < room - 1 ? kmax : room - 1;
    if (kmax > s->cap_hist - s->n_hist - 1)
        kmax = s->cap_hist - s->n_hist - 1;
    const int32_t k = choose_len(s, kmax);
    int32_t n_guess = 0;
    s->guess_q = false;
    if (k > 0 && s->p.lookup > 0)
        n_guess = draft_lookup(s, k);
    double probe_s = 0; /* a probe's seconds beyond a plain step */
    if (k > 0 && n_guess == 0 && s->dft) {
        const double t0 = s->now(s->now_arg);
        if ((n_guess = draft_model(s, smp, k, sampling, err)) < 0)
            return -1;
        probe_s = s->now(s->now_arg) - t0;
        spec_cost_observe_draft(&s->cost, n_guess, probe_s);
        s->guess_q = sampling;
    }

    s->vb.n_tokens = 0;
    woolly_batch_add(&s->vb, s->hist[n_past], n_past, 0, true);
    for (int32_t i = 0; i < n_guess; i++)
        woolly_batch_add(&s->vb, s->guess[i], n_past + 1 + i, 0, true);
    s->tgt->decode_runs = true;
    const double t0 = s->now(s->now_arg);
    const int rc = woolly_context_decode(s->tgt, &s->vb, err);
    const double pass_s = s->now(s->now_arg) - t0;
    spec_cost_observe(&s->cost, n_guess + 1, pass_s);
    if (s->probing && spec_cost_has_unit(&s->cost) && pass_s > s->cost.t[1])
        probe_s += pass_s - s->cost.t[1];
    s->tgt->decode_runs = false;
    if (rc)
        return -1;
    s->pending = false;

    const int32_t old_hist = s->n_hist;
    int32_t accepted = 0;
    for (int32_t j = 0; j <= n_guess; j++) {
        const float *logits = woolly_get_logits(s->tgt, j);
        if (j == n_guess || !sampling) { /* the target's own token; greedily, also the check of guess j */
            const woolly_token t = woolly_sampler_sample(smp, logits);
            if (woolly_sampler_broken(smp))
                return woolly_fail(err, "speculative decoding: %s", woolly_sampler_broken(smp));
            push(s, smp, t, out, &n_out);
            if (j == n_guess || t != s->guess[j] || ends(s, smp, t))
                break;
            accepted++;
            continue;
        }
        const woolly_token x = s->guess[j];
        if (woolly_sampler_probs(smp, logits, s->pr, err))
            return -1;
        const float *q = s->guess_q ? s->q + (size_t)j * (size_t)s->d_vocab : NULL;
        const double qx = q ? q[x] : 1.0;
        if (woolly_sampler_uniform(smp) * qx < s->pr[x]) { /* kept with probability min(1, p(x) / q(x)) */
            push(s, smp, x, out, &n_out);
            accepted++;
            if (ends(s, smp, x))
                break;
            continue;
        }
        push(s, smp, resample(s, smp, x, q, s->d_vocab), out, &n_out);
        break;
    }
    /* The cache keeps the tokens before the last returned one: that one is the next step's pending. */
    if (woolly_context_rewind(s->tgt, s->n_hist - 1))
        return woolly_fail(err, "speculative decoding: %s", woolly_last_error());
    s->pending = true;
    if (s->dft) { /* the draft's cache is right up to the pending token and the accepted guesses */
        int32_t keep = old_hist + accepted < s->n_hist - 1 ? old_hist + accepted : s->n_hist - 1;
        keep -= s->d_off;
        const int32_t dn = woolly_context_n_past(s->dft);
        if (keep < dn && woolly_context_rewind(s->dft, keep > 0 ? keep : 0))
            return woolly_fail(err, "speculative decoding: %s", woolly_last_error());
    }
    if (n_guess > 0) {
        const bool rejected = accepted < n_guess;
        s->acc = ACCEPT_DECAY * s->acc + accepted;
        s->rej = ACCEPT_DECAY * s->rej + (rejected ? 1.0 : 0.0);
        if (s->probing)
            next_probe_gap(s, probe_s, kmax);
    }
    s->st.n_steps++;
    s->st.n_drafted += n_guess;
    s->st.n_accepted += accepted;
    s->st.n_tokens += n_out;
    return n_out;
}

int32_t woolly_spec_step(woolly_spec *s, woolly_sampler *smp, woolly_token *out, int32_t cap)
{
    woolly_error err = {{0}};
    const int32_t n = spec_step(s, smp, out, cap, &err);
    if (n < 0)
        woolly_set_last_error(&err);
    return n;
}

void woolly_spec_set_clock(woolly_spec *s, double (*now)(void *arg), void *arg)
{
    s->now = now ? now : monotonic_s;
    s->now_arg = now ? arg : NULL;
}

spec_cost *woolly_spec_cost(woolly_spec *s)
{
    return &s->cost;
}
