#include "slot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

int srv_slot_open(srv_slot *s, int id, woolly_model *m, woolly_context *ctx, woolly_error *err)
{
    *s = (srv_slot){.id = id, .model = m, .ctx = ctx, .logits_at = -1, .follow = -1, .hold_at = -1};
    s->piece_cap = 64 + woolly_tokenizer_max_token_bytes(m->tok);
    s->cache = malloc(sizeof *s->cache * (size_t)woolly_context_n_ctx(s->ctx));
    s->piece = malloc(s->piece_cap);
    if (!s->cache || !s->piece) {
        srv_slot_close(s);
        return woolly_fail(err, "slot %d: out of memory", id);
    }
    return 0;
}

int srv_slot_speculate(srv_slot *s, srv_spec *sp, woolly_error *err)
{
    const int32_t n_ctx = woolly_context_n_ctx(s->ctx), rows = sp->draft_max + 1;
    s->spec = sp;
    s->plan = malloc(sizeof *s->plan * (size_t)rows);
    if (!s->plan || srv_spec_slot_open(&s->ss, n_ctx))
        return woolly_fail(err, "slot %d: out of memory", s->id);
    return 0;
}

void srv_slot_close(srv_slot *s)
{
    srv_spec_slot_close(&s->ss);
    free(s->plan);
    woolly_sampler_close(s->smp);
    srv_stop_free(&s->stop);
    srv_buf_free(&s->out);
    srv_buf_free(&s->clean);
    free(s->cache);
    free(s->piece);
    *s = (srv_slot){0};
}

int32_t srv_slot_reusable(const srv_slot *s, const woolly_token *prompt, int32_t n)
{
    int32_t k = 0;
    while (k < s->n_cache && k < n - 1 && s->cache[k] == prompt[k])
        k++;
    return k;
}

int srv_slot_adopt(srv_slot *s, const srv_slot *donor, int32_t n)
{
    if (woolly_seq_copy(s->ctx, donor->id, s->id, n))
        return -1;
    memcpy(s->cache, donor->cache, sizeof *s->cache * (size_t)n);
    s->n_cache = n;
    return 0;
}

int srv_slot_follow(srv_slot *s, const srv_slot *leader, int32_t n)
{
    if (n == 0) {
        woolly_seq_rewind(s->ctx, s->id, 0);
        s->n_cache = 0;
    } else if (srv_slot_adopt(s, leader, n)) {
        return -1;
    }
    s->n_reused = 0;
    return 0;
}

static void fail(srv_slot *s, const char *msg)
{
    s->finish = SRV_FINISH_ERROR;
    snprintf(s->error, sizeof s->error, "%s", msg);
}

int srv_slot_attach(srv_slot *s, srv_job *j)
{
    s->job = j;
    s->finish = SRV_FINISH_NONE;
    s->error[0] = 0;
    s->n_gen = 0;
    s->n_guess = 0;
    s->n_drafted = s->n_accepted = 0;
    s->out.len = 0;
    s->follow = -1;
    s->hold_at = -1;
    int32_t keep = j->embed ? 0 : srv_slot_reusable(s, j->prompt, j->n_prompt);
    if (woolly_seq_rewind(s->ctx, s->id, keep)) { /* a sliding window's ring has moved past it */
        keep = 0;
        woolly_seq_rewind(s->ctx, s->id, 0);
    }
    s->n_cache = keep;
    s->n_reused = keep;
    s->fill = j->prompt;
    s->n_fill = j->n_prompt;
    srv_job_progress(j, keep, 0);
    if (j->embed)
        return 0; /* nothing is sampled */
    if (!(s->smp = woolly_sampler_open(s->model, &j->sp)) ||
        woolly_sampler_set_logit_bias(s->smp, j->bias.id, j->bias.bias, j->bias.n) ||
        (j->grammar && woolly_sampler_set_grammar(s->smp, s->model, j->grammar))) {
        fail(s, woolly_last_error());
        return -1;
    }
    /* As `woolly run` does: the prompt is in the penalties' window, and the detokenizer has seen it, so
     * that the first generated token decodes as a continuation (no dropped leading space). */
    woolly_detok_stream_init(&s->ds, s->model->tok);
    for (int32_t i = 0; i < j->n_prompt; i++) {
        woolly_sampler_accept(s->smp, j->prompt[i]);
        woolly_detok_stream_feed(&s->ds, j->prompt[i], s->piece, s->piece_cap);
    }
    srv_stop_init(&s->stop, j->stop, j->n_stop);
    return 0;
}

/* Passes detokenized bytes through UTF-8 repair and the stop-string matcher into s->out. Returns 1 if
 * a stop string appeared, 0, or -1 when out of memory. */
static int release(srv_slot *s, const char *bytes, size_t n)
{
    s->clean.len = 0;
    if (srv_buf_append_utf8(&s->clean, bytes, n))
        return -1;
    return srv_stop_feed(&s->stop, s->clean.p, s->clean.len, &s->out);
}

/* Hands s->out to the job as one piece (an empty one too when `always`: a streamed response sends one
 * chunk per generated token, with the text that token completed, which may be none). */
static bool emit_out(srv_slot *s, bool always)
{
    if (!always && s->out.len == 0)
        return true;
    const int rc = srv_job_emit(s->job, s->out.p ? s->out.p : "", s->out.len);
    s->out.len = 0;
    if (rc)
        fail(s, "out of memory for the generated text");
    return rc == 0;
}

/* The end of generation: what the detokenizer and the stop matcher still hold is released. */
static void end(srv_slot *s, srv_finish why)
{
    const int64_t n = woolly_detok_stream_flush(&s->ds, s->piece, s->piece_cap);
    int rc = n > 0 ? release(s, s->piece, (size_t)n) : 0;
    if (rc == 0)
        rc = srv_stop_flush(&s->stop, &s->out);
    if (rc < 0) {
        fail(s, "out of memory for the generated text");
        return;
    }
    if (rc == 1)
        why = SRV_FINISH_STOP;
    if (emit_out(s, false))
        s->finish = why;
}

bool srv_slot_in_prompt(const srv_slot *s)
{
    return s->finish == SRV_FINISH_NONE && s->n_cache < s->n_fill;
}

/* The cache is full and tok waits to be evaluated: forgets half of what follows the kept tokens, and
 * makes the rest and tok what the cache is filled with, at their new positions. As `woolly run
 * --context-shift` does it: the rest is evaluated again rather than its keys rotated (model/
 * context_shift.c says why). False when nothing can be forgotten. */
static bool shift(srv_slot *s, woolly_token tok)
{
    const int32_t keep = s->job->n_keep, n_discard = (s->n_cache - keep) / 2;
    if (n_discard < 1)
        return false;
    const int32_t tail = s->n_cache - keep - n_discard;
    memmove(s->cache + keep, s->cache + keep + n_discard, sizeof *s->cache * (size_t)tail);
    s->cache[keep + tail] = tok;
    s->fill = s->cache;
    s->n_fill = keep + tail + 1;
    s->n_cache = keep;
    if (woolly_seq_rewind(s->ctx, s->id, keep)) { /* a sliding window's ring has moved past them */
        s->n_cache = 0;
        woolly_seq_rewind(s->ctx, s->id, 0);
    }
    return true;
}

/* Samples the next token from logits and hands it on (log-probabilities, detokenized text, stop strings).
 * False when the job is over (s->finish says why, except after a failure). */
static bool sample_one(srv_slot *s, const float *logits, woolly_token *out)
{
    srv_job *j = s->job;
    const woolly_token tok = woolly_sampler_sample(s->smp, logits);
    const char *why = woolly_sampler_error(s->smp);
    if (why) { /* not a stop: the output is cut where the grammar gave up or the logits broke down */
        fail(s, why);
        return false;
    }
    woolly_sampler_accept(s->smp, tok);
    /* A grammar that ended the output (it allows nothing more, or only the end) ends the choice, whatever
     * ignore_eos says: the token it returned then is not part of the output. */
    if (woolly_sampler_grammar_done(s->smp) || (!j->ignore_eos && woolly_token_is_eog(s->model, tok))) {
        end(s, SRV_FINISH_STOP);
        return false;
    }
    if (j->logprobs) {
        srv_token_lp lp;
        srv_logprobs_compute(logits, woolly_model_n_vocab(s->model), tok, j->top_logprobs, &lp);
        if (srv_job_logprob(j, &lp)) {
            fail(s, "out of memory for the log-probabilities");
            return false;
        }
    }
    s->n_gen++;
    const int64_t len = woolly_detok_stream_feed(&s->ds, tok, s->piece, s->piece_cap);
    int rc = len > 0 ? release(s, s->piece, (size_t)len) : 0;
    for (int k = 0; k < j->n_spelled && len >= 0 && rc == 0; k++)
        if (j->spelled[k] == tok) {
            const char *marker = woolly_tokenizer_piece(s->model->tok, tok);
            rc = release(s, marker, strlen(marker));
        }
    if (len < 0 || rc < 0) {
        fail(s, len < 0 ? "cannot decode a generated token" : "out of memory for the generated text");
        return false;
    }
    if (!emit_out(s, true))
        return false;
    srv_job_progress(j, s->n_reused, s->n_gen);
    if (rc == 1) { /* a stop string: nothing after it is sent */
        s->finish = SRV_FINISH_STOP;
        return false;
    }
    if (j->max_tokens > 0 && s->n_gen >= j->max_tokens) {
        end(s, SRV_FINISH_LENGTH);
        return false;
    }
    *out = tok;
    return true;
}

bool srv_slot_plan(srv_slot *s, int32_t max_prompt, const woolly_token **ids, int32_t *n)
{
    srv_job *j = s->job;
    if (s->finish != SRV_FINISH_NONE)
        return false;
    if (s->n_cache < s->n_fill) {
        const int32_t rest = s->n_fill - s->n_cache;
        *ids = s->fill + s->n_cache;
        *n = rest < max_prompt ? rest : max_prompt;
        return true;
    }
    if (j->embed) { /* the whole input is evaluated: pool */
        srv_slot_pool_finish(s);
        return false;
    }
    /* Without speculation one token is sampled. A speculating slot samples from the logits after its
     * last token and after each guess in turn while it samples the guess (then that guess, in the cache
     * already, is kept), as plain decoding would after the same tokens. The step's one batch had them
     * all, the last guess's at logits_at. */
    woolly_token tok;
    int32_t row = 0;
    for (;; row++) {
        const float *logits = woolly_get_logits(s->ctx, s->logits_at - s->n_guess + row);
        if (!logits) {
            fail(s, woolly_last_error());
            return false;
        }
        if (!sample_one(s, logits, &tok)) {
            s->n_drafted += s->n_guess; /* the job is over: the guesses up to this one were kept */
            s->n_accepted += row;
            return false;
        }
        if (row >= s->n_guess || tok != s->plan[row + 1])
            break;
    }
    if (s->n_guess > 0) { /* the guesses after the kept ones leave the cache */
        srv_spec_checked(&s->ss, s->n_guess, row);
        s->n_drafted += s->n_guess;
        s->n_accepted += row;
        if (row < s->n_guess) {
            s->n_cache -= s->n_guess - row;
            if (woolly_seq_rewind(s->ctx, s->id, s->n_cache)) {
                fail(s, woolly_last_error());
                return false;
            }
        }
        s->n_guess = 0;
    }
    if (s->n_cache == woolly_context_n_ctx(s->ctx)) {
        if (!j->context_shift || !shift(s, tok)) {
            end(s, SRV_FINISH_LENGTH);
            return false;
        }
        *ids = s->fill + s->n_cache; /* one token now; the steps to come take the rest as a prompt */
        *n = 1;
        return true;
    }
    if (s->spec) {
        s->plan[0] = tok;
        s->cache[s->n_cache] = tok; /* the text so far, for lookup (the evaluation writes it there too) */
        const int32_t room = woolly_context_n_ctx(s->ctx) - s->n_cache - 1;
        s->n_guess = srv_spec_guess(s->spec, &s->ss, s->id, s->cache, s->n_cache + 1, s->plan + 1, room);
        *ids = s->plan;
        *n = 1 + s->n_guess; /* the draft's guesses come later (srv_slot_drafted) */
        return true;
    }
    s->next = tok;
    *ids = &s->next;
    *n = 1;
    return true;
}

int32_t srv_slot_drafted(srv_slot *s)
{
    s->n_guess = s->ss.got;
    return 1 + s->n_guess;
}

void srv_slot_evaluated(srv_slot *s, const woolly_token *ids, int32_t n, int rc, int32_t logits_at)
{
    if (rc) {
        fail(s, woolly_last_error());
        return;
    }
    s->logits_at = logits_at;
    memmove(s->cache + s->n_cache, ids, sizeof *ids * (size_t)n); /* after a shift ids lie there already */
    s->n_cache += n;
}

void srv_slot_pool(srv_slot *s, int32_t row0, int32_t n)
{
    srv_job *j = s->job;
    for (int32_t t = 0; t < n; t++) {
        const float *e = woolly_get_embeddings(s->ctx, row0 + t);
        if (!e) {
            fail(s, woolly_last_error());
            return;
        }
        for (int32_t i = 0; i < j->n_embd; i++)
            j->embd_sum[i] += e[i];
    }
}

/* Mean pooling, then the L2 norm (what llama.cpp does for a decoder model's embeddings by default). */
void srv_slot_pool_finish(srv_slot *s)
{
    srv_job *j = s->job;
    double norm = 0.0;
    for (int32_t i = 0; i < j->n_embd; i++) {
        const double m = j->embd_sum[i] / j->n_prompt;
        j->embd_sum[i] = m;
        norm += m * m;
    }
    norm = sqrt(norm);
    if (!isfinite(norm)) { /* a NaN would turn every component into 0 below, a plausible-looking vector */
        fail(s, "the model's hidden states hold a NaN or an infinity: its weights or its arithmetic give "
                "non-finite numbers, so the embedding would mean nothing (a damaged model file?)");
        return;
    }
    for (int32_t i = 0; i < j->n_embd; i++)
        j->embd[i] = (float)(norm > 0.0 ? j->embd_sum[i] / norm : 0.0);
    s->finish = SRV_FINISH_STOP;
}

void srv_slot_cancel(srv_slot *s)
{
    s->finish = SRV_FINISH_CANCELLED;
}

void srv_slot_detach(srv_slot *s)
{
    srv_job *j = s->job;
    srv_job_progress(j, s->n_reused, s->n_gen);
    j->n_drafted = s->n_drafted; /* read after the finish below, under the job's lock */
    j->n_accepted = s->n_accepted;
    srv_job_finish(j, s->finish, s->finish == SRV_FINISH_ERROR ? s->error : NULL);
    srv_job_release(j);
    woolly_sampler_close(s->smp);
    s->smp = NULL;
    srv_stop_free(&s->stop);
    s->job = NULL;
}
