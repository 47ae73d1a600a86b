/* A slot: one sequence (its own KV cache region) of the scheduler's multi-sequence context, and the
 * generation state of the job it runs. A slot never evaluates anything itself: srv_slot_plan says which
 * tokens it needs evaluated next (a chunk of the prompt, or the token it has just sampled), the
 * scheduler evaluates them in one batch with the other slots' tokens, and srv_slot_evaluated records
 * that. So the scheduler is the one place where forward passes are issued.
 *
 * The slot remembers the tokens in its KV cache after a job ends: a later job whose prompt starts with
 * them (a conversation that goes on) evaluates only the rest (prompt caching). A slot can also take the
 * beginning another slot holds (a system prompt that many requests share), copied rather than evaluated.
 *
 * With the job's context_shift, a full cache does not end the job: the slot forgets half of what follows
 * the job's n_keep tokens and fills its cache again with the rest, at their new positions, as it fills
 * it with a prompt (srv_slot_plan), in the scheduler's batches beside the other slots' tokens. */
#ifndef WOOLLY_SRV_SLOT_H
#define WOOLLY_SRV_SLOT_H

#include <stdbool.h>
#include <stdint.h>

#include "job.h"
#include "spec.h"
#include "stop.h"
#include "text.h"
#include "tokenizer.h"
#include "woolly.h"

typedef struct srv_slot {
    int id;
    woolly_model *model;
    woolly_context *ctx; /* shared by all slots: this slot is its sequence `id` */
    woolly_token *cache; /* [n_ctx] the tokens in the sequence's KV cache, n_cache of them */
    int32_t n_cache;
    uint64_t last_used; /* scheduler's clock when the slot last took a job */

    srv_job *job; /* NULL: free */
    woolly_sampler *smp;
    woolly_detok_stream ds;
    srv_stop stop;
    const woolly_token *fill; /* the cache is filled from fill[n_cache..n_fill) before the slot samples: */
    int32_t n_fill;           /* the job's prompt, or after a context shift what the cache keeps */
    int32_t n_reused;  /* prompt tokens found in the cache */
    int32_t n_gen;     /* tokens generated */
    woolly_token next; /* the sampled token that waits to be evaluated */
    int32_t logits_at; /* the token of the last batch whose logits are this slot's next distribution */
    srv_finish finish; /* set when the job is over: the scheduler then frees the slot */
    char error[256];   /* with SRV_FINISH_ERROR */
    int follow;        /* a follower of a group (job.h) waiting for its leader's prompt: the leader's slot,
                          else -1 */
    int32_t hold_at;   /* a leader with followers: its prompt stops here (all but the last token) until
                          they have copied it, so that every choice evaluates that token alike; else -1 */
    srv_spec *spec;     /* the scheduler's speculative decoding (spec.h), or NULL */
    srv_spec_slot ss;   /* with spec: this slot's drafting state */
    woolly_token *plan; /* with spec: [draft_max + 1] the sampled token and its guesses, evaluated together */
    int32_t n_guess;    /* guesses of the evaluated plan, checked by the next srv_slot_plan */
    int32_t n_drafted, n_accepted; /* the job's guesses and those kept */
    char *piece;       /* detokenizer output */
    size_t piece_cap;
    srv_buf clean; /* detokenizer output after UTF-8 repair */
    srv_buf out;   /* text released by the stop-string matcher */
} srv_slot;

/* Slot `id` runs sequence `id` of ctx (which has at least id + 1 sequences). */
int srv_slot_open(srv_slot *s, int id, woolly_model *m, woolly_context *ctx, woolly_error *err);
void srv_slot_close(srv_slot *s);

/* Makes the slot speculate with sp (which outlives it). 0, or -1 with a message. */
int srv_slot_speculate(srv_slot *s, srv_spec *sp, woolly_error *err);

/* How many leading tokens of a prompt the slot's cache holds (at most n - 1: the last prompt token is
 * always evaluated, for its logits). */
int32_t srv_slot_reusable(const srv_slot *s, const woolly_token *prompt, int32_t n);

/* Makes the slot's cache the first n tokens of donor's (n <= srv_slot_reusable(donor, ...) for the prompt
 * to come), copying their keys and values. The slot is free; the donor may be busy: its first n tokens
 * do not change while it runs. 0, or -1 (then nothing changed). */
int srv_slot_adopt(srv_slot *s, const srv_slot *donor, int32_t n);

/* A follower of a group (job.h) takes the first n tokens of its leader's prompt from the leader's slot
 * (n = 0: none, its cache is emptied). 0, or -1 (then nothing changed). */
int srv_slot_follow(srv_slot *s, const srv_slot *leader, int32_t n);

/* Takes a job (the slot holds a reference until srv_slot_detach). 0, or -1 when its sampler cannot be
 * made (the job is finished with an error then). */
int srv_slot_attach(srv_slot *s, srv_job *j);

/* Whether the slot's next step is a chunk of its prompt or of what a context shift keeps (rather than one
 * generated token). */
bool srv_slot_in_prompt(const srv_slot *s);

/* The tokens to evaluate next (*ids, *n: at most max_prompt of the prompt, or the one token it has just
 * sampled, or after a context shift the first token the cache keeps), returning true; or false when the
 * job is over (s->finish says why). Samples the next token when the prompt has been evaluated. */
bool srv_slot_plan(srv_slot *s, int32_t max_prompt, const woolly_token **ids, int32_t *n);
/* A speculating slot whose plan waits for the draft model's guesses (s->ss.pending after
 * srv_slot_plan): takes the guesses srv_spec_draft made; the plan's new length (its ids as planned). */
int32_t srv_slot_drafted(srv_slot *s);
/* After the scheduler evaluated the planned tokens (rc 0; logits_at: the batch token whose logits
 * follow them, or -1 after a prompt chunk that is not the last; a speculating slot's plan of a token and
 * its guesses has every token's logits, the last at logits_at), or the evaluation failed (rc -1) and
 * the job ends with that error. */
void srv_slot_evaluated(srv_slot *s, const woolly_token *ids, int32_t n, int rc, int32_t logits_at);
/* An embedding job: adds the final hidden states of rows row0 .. row0 + n - 1 of the last batch (its
 * tokens) to its sum; srv_slot_pool_finish makes the vector when the whole input is in. */
void srv_slot_pool(srv_slot *s, int32_t row0, int32_t n);
void srv_slot_pool_finish(srv_slot *s);
/* Ends the job as cancelled (the client went away). */
void srv_slot_cancel(srv_slot *s);
/* Hands the job its final text and reason, drops the slot's reference, frees the slot. */
void srv_slot_detach(srv_slot *s);

#endif
