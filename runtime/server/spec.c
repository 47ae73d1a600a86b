/* The server's speculative decoding (spec.h). */
#include "spec.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "speculative.h"

enum {
    DRAFT_BATCH = 64,    /* the draft's catch-up chunks, per slot */
    DRAFT_SLOTS = 8,     /* the slots whose chunks one draft pass holds at most (a bound on its buffers) */
    PROBE_GAP_MIN = 8,   /* steps without guesses before a slot tries one again, growing ... */
    PROBE_GAP_MAX = 256, /* ... to this while it keeps failing */
};
#define ACCEPT_DECAY 0.9

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int srv_spec_open(srv_spec *sp, woolly_model *target, woolly_model *draft, int n_slots, int32_t n_ctx,
                  int32_t draft_max, int32_t lookup, int32_t n_threads, woolly_kv_type kv, woolly_error *err)
{
    memset(sp, 0, sizeof *sp);
    if (draft_max < 1 || draft_max > SPEC_COST_MAX_N - 1)
        return woolly_fail(err, "draft-max %d must be in [1, %d]", draft_max, SPEC_COST_MAX_N - 1);
    if (lookup < 0 || lookup > 16)
        return woolly_fail(err, "lookup %d must be in [1, 16] (0 turns it off)", lookup);
    if (!draft && lookup == 0)
        return woolly_fail(err, "speculative decoding needs a draft model or prompt lookup (lookup > 0)");
    sp->draft_max = draft_max;
    sp->lookup = lookup;
    sp->n_vocab = woolly_model_n_vocab(target);
    spec_cost_init(&sp->cost, draft ? (double)woolly_model_size(draft) / (double)woolly_model_size(target) : 0.0);
    if (!draft)
        return 0;
    if (woolly_spec_check_vocab(target, draft, err))
        return -1;
    sp->d_vocab = woolly_model_n_vocab(draft);
    /* A pass holds a guess of every slot, and catch-up chunks of up to DRAFT_SLOTS slots. */
    const int32_t n_batch = n_slots + DRAFT_BATCH * (n_slots < DRAFT_SLOTS ? n_slots : DRAFT_SLOTS);
    woolly_context_params dp = woolly_context_default_params();
    dp.n_ctx = n_ctx;
    dp.n_seq_max = n_slots;
    dp.n_batch = n_batch;
    dp.n_threads = n_threads;
    dp.kv_type = kv;
    if (!(sp->dctx = woolly_context_open(draft, &dp)))
        return woolly_fail(err, "draft model: %s", woolly_last_error());
    if (woolly_batch_init(&sp->db, n_batch)) {
        srv_spec_close(sp);
        return woolly_fail(err, "out of memory");
    }
    return 0;
}

void srv_spec_fix_length(srv_spec *sp)
{
    sp->fixed = true;
}

void srv_spec_close(srv_spec *sp)
{
    woolly_context_close(sp->dctx);
    woolly_batch_free(&sp->db);
    memset(sp, 0, sizeof *sp);
}

int srv_spec_slot_open(srv_spec_slot *ss, int32_t n_ctx)
{
    *ss = (srv_spec_slot){.acc = 1.0, .rej = 1.0, .probe_gap = PROBE_GAP_MIN}; /* no evidence: one half */
    ss->d_tok = malloc(sizeof *ss->d_tok * (size_t)(n_ctx + 1));
    return ss->d_tok ? 0 : -1;
}

void srv_spec_slot_close(srv_spec_slot *ss)
{
    free(ss->d_tok);
    ss->d_tok = NULL;
}

/* The number of guesses to ask for, as woolly_spec's adaptive length: the best for the slot's estimated
 * acceptance at the measured costs, else none but a probe now and then. */
static int32_t choose_len(srv_spec *sp, srv_spec_slot *ss, int32_t kmax)
{
    ss->probing = false;
    if (kmax < 1)
        return 0;
    if (sp->fixed)
        return kmax;
    const int32_t best = spec_cost_best_len(&sp->cost, ss->acc / (ss->acc + ss->rej), kmax, sp->dctx != NULL);
    if (best > 0) {
        ss->idle = 0;
        return best;
    }
    if (++ss->idle < ss->probe_gap)
        return 0;
    ss->idle = 0;
    ss->probing = true;
    return 1;
}

/* Readies a pending slot for the draft's passes: its sequence keeps what it shares with hist (all but
 * the last token at most: that one's logits give the first guess). False when the draft cannot guess for
 * it (then it gets none; a draft that cannot guess only costs speed). */
static bool draft_begin(srv_spec *sp, srv_spec_slot *ss)
{
    woolly_context *d = sp->dctx;
    ss->pending = false;
    ss->got = 0;
    if (ss->h + ss->want - 1 > woolly_context_n_ctx(d))
        return false;
    for (int32_t i = 0; i < ss->h; i++)
        if (ss->hist[i] >= sp->d_vocab)
            return false;
    int32_t keep = 0;
    while (keep < ss->d_n && keep < ss->h - 1 && ss->d_tok[keep] == ss->hist[keep])
        keep++;
    if (woolly_seq_rewind(d, ss->seq, keep)) {
        keep = 0;
        if (woolly_seq_rewind(d, ss->seq, 0)) {
            ss->d_n = 0;
            return false;
        }
    }
    ss->d_n = ss->done = keep;
    return true;
}

/* After a pass that held the slot's last token (row): its greedy guess, or the end of its guesses. */
static void draft_next(srv_spec *sp, srv_spec_slot *ss)
{
    const float *logits = woolly_get_logits(sp->dctx, ss->row);
    const woolly_token t = logits ? woolly_sample_greedy(logits, sp->d_vocab) : -1;
    if (t < 0 || t >= sp->n_vocab) { /* no logits, or a trailing token the target does not have */
        ss->busy = false;
        return;
    }
    ss->out[ss->got++] = t;
    ss->busy = ss->got < ss->want; /* the last guess is not evaluated: nothing follows it */
}

/* Each pass holds, for every busy slot, its latest guess or its next catch-up chunk (of DRAFT_BATCH
 * tokens from where its sequence stands, as when slots drafted one after another; a chunk that does not
 * fit waits for the next pass). A slot's sequence thus sees the tokens it saw then, in the same runs. */
int32_t srv_spec_draft(srv_spec *sp, srv_spec_slot *const *slots, int n)
{
    woolly_batch *b = &sp->db;
    const double t0 = now_s();
    int32_t passes = 0, guesses = 0;
    for (int i = 0; i < n; i++)
        slots[i]->busy = draft_begin(sp, slots[i]);
    for (;;) {
        b->n_tokens = 0;
        for (int i = 0; i < n; i++) { /* the guesses first: one token each, they always fit */
            srv_spec_slot *ss = slots[i];
            ss->fed = 0;
            if (ss->busy && ss->done == ss->h) {
                ss->row = b->n_tokens;
                ss->fed = 1;
                woolly_batch_add(b, ss->out[ss->got - 1], ss->d_n, ss->seq, true);
            }
        }
        for (int i = 0; i < n; i++) {
            srv_spec_slot *ss = slots[i];
            const int32_t left = ss->h - ss->done, chunk = left < DRAFT_BATCH ? left : DRAFT_BATCH;
            if (!ss->busy || left == 0 || chunk > b->cap - b->n_tokens)
                continue;
            for (int32_t t = 0; t < chunk; t++)
                woolly_batch_add(b, ss->hist[ss->done + t], ss->done + t, ss->seq, t == left - 1);
            ss->row = b->n_tokens - 1;
            ss->fed = chunk;
        }
        if (b->n_tokens == 0)
            break;
        passes++;
        if (woolly_decode(sp->dctx, b)) { /* the slots keep the guesses they have; those catching up: none */
            for (int i = 0; i < n; i++)
                slots[i]->busy = false;
            break;
        }
        for (int i = 0; i < n; i++) {
            srv_spec_slot *ss = slots[i];
            if (ss->fed == 0)
                continue;
            if (ss->done == ss->h) {
                ss->d_tok[ss->d_n++] = ss->out[ss->got - 1];
            } else {
                memcpy(ss->d_tok + ss->done, ss->hist + ss->done, sizeof *ss->hist * (size_t)ss->fed);
                ss->d_n = ss->done += ss->fed;
                if (ss->done < ss->h)
                    continue;
            }
            draft_next(sp, ss);
        }
    }
    for (int i = 0; i < n; i++)
        guesses += slots[i]->got;
    spec_cost_observe_draft(&sp->cost, guesses, now_s() - t0);
    return passes;
}

int32_t srv_spec_guess(srv_spec *sp, srv_spec_slot *ss, int seq, const woolly_token *hist, int32_t h,
                       woolly_token *out, int32_t kmax)
{
    ss->pending = false;
    kmax = kmax < sp->draft_max ? kmax : sp->draft_max;
    const int32_t k = choose_len(sp, ss, kmax);
    if (k < 1)
        return 0;
    const int32_t n = sp->lookup > 0 ? woolly_spec_lookup(hist, h, sp->lookup, out, k) : 0;
    if (n == 0 && sp->dctx) {
        ss->pending = true;
        ss->seq = seq;
        ss->hist = hist;
        ss->h = h;
        ss->out = out;
        ss->want = k;
        ss->got = 0;
    }
    return n;
}

void srv_spec_checked(srv_spec_slot *ss, int32_t n_guess, int32_t accepted)
{
    if (n_guess < 1)
        return;
    ss->acc = ACCEPT_DECAY * ss->acc + accepted;
    ss->rej = ACCEPT_DECAY * ss->rej + (accepted < n_guess ? 1.0 : 0.0);
    if (ss->probing)
        ss->probe_gap = accepted ? PROBE_GAP_MIN
                                 : (ss->probe_gap * 2 < PROBE_GAP_MAX ? ss->probe_gap * 2 : PROBE_GAP_MAX);
}
