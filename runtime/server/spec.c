/* The server's speculative decoding (spec.h). */
#include "spec.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "speculative.h"

enum {
    DRAFT_BATCH = 64,  /* the draft's catch-up chunks */
    PROBE_GAP_MIN = 8, /* steps without guesses before a slot tries one again, growing ... */
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
    woolly_context_params dp = woolly_context_default_params();
    dp.n_ctx = n_ctx;
    dp.n_seq_max = n_slots;
    dp.n_batch = DRAFT_BATCH;
    dp.n_threads = n_threads;
    dp.kv_type = kv;
    if (!(sp->dctx = woolly_context_open(draft, &dp)))
        return woolly_fail(err, "draft model: %s", woolly_last_error());
    if (woolly_batch_init(&sp->db, DRAFT_BATCH)) {
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

/* Brings the draft's sequence to hist[0 .. h) (keeping what it shares with it) and draws up to k greedy
 * guesses. Their count; 0 on any failure (a draft that cannot guess only costs speed). */
static int32_t draft_guess(srv_spec *sp, srv_spec_slot *ss, int seq, const woolly_token *hist, int32_t h,
                           woolly_token *out, int32_t k)
{
    woolly_context *d = sp->dctx;
    if (h + k - 1 > woolly_context_n_ctx(d))
        return 0;
    for (int32_t i = 0; i < h; i++)
        if (hist[i] >= sp->d_vocab)
            return 0;
    int32_t keep = 0;
    while (keep < ss->d_n && keep < h - 1 && ss->d_tok[keep] == hist[keep])
        keep++;
    if (woolly_seq_rewind(d, seq, keep)) {
        keep = 0;
        if (woolly_seq_rewind(d, seq, 0))
            return ss->d_n = 0;
    }
    ss->d_n = keep;
    for (int32_t done = keep; done < h;) {
        const int32_t chunk = h - done < DRAFT_BATCH ? h - done : DRAFT_BATCH;
        sp->db.n_tokens = 0;
        for (int32_t i = 0; i < chunk; i++)
            woolly_batch_add(&sp->db, hist[done + i], done + i, seq, done + i == h - 1);
        if (woolly_decode(d, &sp->db))
            return 0;
        memcpy(ss->d_tok + done, hist + done, sizeof *hist * (size_t)chunk);
        ss->d_n = done += chunk;
    }
    for (int32_t i = 0; i < k; i++) {
        const float *logits = woolly_get_logits(d, -1);
        if (!logits)
            return i;
        const woolly_token t = woolly_sample_greedy(logits, sp->d_vocab);
        if (t < 0 || t >= sp->n_vocab) /* a trailing token the target does not have */
            return i;
        out[i] = t;
        if (i + 1 == k)
            return k;
        sp->db.n_tokens = 0;
        woolly_batch_add(&sp->db, t, ss->d_n, seq, true);
        if (woolly_decode(d, &sp->db))
            return i + 1;
        ss->d_tok[ss->d_n++] = t;
    }
    return k;
}

int32_t srv_spec_guess(srv_spec *sp, srv_spec_slot *ss, int seq, const woolly_token *hist, int32_t h,
                       woolly_token *out, int32_t kmax)
{
    kmax = kmax < sp->draft_max ? kmax : sp->draft_max;
    const int32_t k = choose_len(sp, ss, kmax);
    if (k < 1)
        return 0;
    int32_t n = sp->lookup > 0 ? woolly_spec_lookup(hist, h, sp->lookup, out, k) : 0;
    if (n == 0 && sp->dctx) {
        const double t0 = now_s();
        n = draft_guess(sp, ss, seq, hist, h, out, k);
        spec_cost_observe_draft(&sp->cost, n, now_s() - t0);
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
