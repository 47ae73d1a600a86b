/* The server's speculative decoding (`woolly serve --draft MODEL / --lookup N`): each generating slot
 * guesses the tokens after the one it has just sampled, from prompt lookup over its own text or from a
 * draft model (a context of its own with one sequence per slot), and the scheduler evaluates every
 * slot's sampled token and guesses in the step's one batch, on the decode path (each token with plain
 * decoding's arithmetic), beside the prompt chunks of other slots on the prompt path. The slot then
 * samples from each guess's logits in turn, as plain decoding would after the same tokens, and keeps the
 * guesses up to the first one it did not sample: the text is the one without speculation, token for
 * token, greedy or sampled with the same seed (a guess is a point mass, so sampling and comparing is the
 * exact acceptance rule). The KV cache forgets the rest.
 *
 * Draft guesses are the draft's greedy tokens. The number of guesses per slot follows its acceptance
 * and the measured cost of the engine's decode batches (spec_cost.h): the batch of all slots' tokens
 * is timed by its size, an approximation of each slot's share. The draft works for all the step's
 * drafting slots at once: each of its passes is one batch of every drafting slot's next tokens, in the
 * slot's sequence: a chunk of those the draft has not seen yet, or once it has seen them all, the slot's
 * latest guess. So k guesses of S slots cost about k draft passes rather than S x k. Each sequence sees
 * the same tokens in the same chunks as when the slots drafted one after another, and the kernels
 * compute a token's row independently of the batch it is in, so the guesses are the same (tested); but
 * for the attention of a lone token at long context, which may split its cache across the threads when
 * it is all of a pass (attn_run.c), and is not split in a pass with other slots' tokens. */
#ifndef WOOLLY_SRV_SPEC_H
#define WOOLLY_SRV_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "spec_cost.h"
#include "woolly.h"

typedef struct srv_spec {
    woolly_context *dctx; /* the draft model's, one sequence per slot; NULL: lookup only */
    int32_t n_vocab, d_vocab;
    int32_t draft_max, lookup;
    bool fixed;      /* always draft_max guesses (as many as the source gives), for tests */
    woolly_batch db; /* the draft's passes: the slots' catch-up chunks and guesses */
    spec_cost cost;  /* the decode batches' and the draft's guesses' costs, as measured */
} srv_spec;

/* Per slot: what its drafting needs between steps, and the step's draft request. */
typedef struct srv_spec_slot {
    double acc, rej; /* decayed counts of accepted guesses and of rejections */
    int idle, probe_gap;
    bool probing;
    woolly_token *d_tok; /* [n_ctx] the tokens in the draft's sequence of this slot */
    int32_t d_n;
    /* The step's request to the draft model (srv_spec_guess leaves it, srv_spec_draft answers it). */
    bool pending;
    int seq;
    const woolly_token *hist; /* the slot's text: the draft's sequence is brought to hist[0 .. h) */
    int32_t h;
    woolly_token *out; /* the guesses: want at most, got of them */
    int32_t want, got;
    int32_t done;     /* of hist, the tokens in the draft's sequence */
    int32_t fed, row; /* the slot's tokens in the current pass, and the row of the last one */
    bool busy;        /* still in the draft's passes */
} srv_spec_slot;

/* draft: a model with the target's vocabulary or NULL (then lookup > 0); one sequence per slot of
 * n_ctx positions, n_threads and kv as the target's. 0, or -1 with a message. */
int srv_spec_open(srv_spec *sp, woolly_model *target, woolly_model *draft, int n_slots, int32_t n_ctx,
                  int32_t draft_max, int32_t lookup, int32_t n_threads, woolly_kv_type kv, woolly_error *err);
/* Turns the adaptive length off: every step asks for draft_max guesses (tests). */
void srv_spec_fix_length(srv_spec *sp);
void srv_spec_close(srv_spec *sp);

int srv_spec_slot_open(srv_spec_slot *ss, int32_t n_ctx);
void srv_spec_slot_close(srv_spec_slot *ss);

/* Up to kmax guesses after hist[0 .. h) (the slot's cache and its sampled token) for the slot of
 * sequence seq, written to out; their count. Guesses of the draft model are not made here: the slot is
 * left pending (ss->pending, 0 returned), and srv_spec_draft makes them with the other slots': hist and
 * out must stay as they are until then. */
int32_t srv_spec_guess(srv_spec *sp, srv_spec_slot *ss, int seq, const woolly_token *hist, int32_t h,
                       woolly_token *out, int32_t kmax);
/* The draft model's guesses of the n pending slots, in batched passes: each slot's ss->got (0 .. want)
 * of them in its out; the slots are no longer pending. Returns the draft's forward passes. */
int32_t srv_spec_draft(srv_spec *sp, srv_spec_slot *const *slots, int n);
/* Of n_guess guesses, `accepted` were kept (the first rejected one, if any, ends them). */
void srv_spec_checked(srv_spec_slot *ss, int32_t n_guess, int32_t accepted);

#endif
