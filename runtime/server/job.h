/* A generation job: what a request asks for (its prompt tokens and sampling), and the channel through
 * which the engine thread hands its output to the connection thread that serves the request. The text
 * arrives in pieces, one per generated token (the text it completed, possibly none: UTF-8 characters are
 * never split across pieces, and text that may begin a stop string waits), plus one at the end when
 * held text is released; a streaming response sends each piece as one event.
 *
 * A job is shared by the connection thread and the scheduler and freed when both have released it.
 * The connection thread cancels it (the client went away) by srv_scheduler_cancel. */
#ifndef WOOLLY_SRV_JOB_H
#define WOOLLY_SRV_JOB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "logprobs.h"
#include "stop.h"
#include "text.h"
#include "woolly.h"

/* The most choices one request may ask for (n); a request also gets no more than the server's slots. */
#define SRV_MAX_CHOICES 16

typedef enum srv_finish {
    SRV_FINISH_NONE = 0, /* still running */
    SRV_FINISH_STOP,     /* an end-of-generation token or a stop string */
    SRV_FINISH_LENGTH,   /* max_tokens, or the context is full */
    SRV_FINISH_CANCELLED,
    SRV_FINISH_ERROR,
} srv_finish;

#define SRV_MAX_SPELLED 4

/* A request's logit_bias (OpenAI's): bias[i] added to token id[i]'s logit before sampling
 * (woolly_sampler_set_logit_bias). */
#define SRV_MAX_LOGIT_BIAS 1024
typedef struct srv_logit_bias {
    int32_t n;
    woolly_token id[SRV_MAX_LOGIT_BIAS];
    float bias[SRV_MAX_LOGIT_BIAS];
} srv_logit_bias;

typedef struct srv_job {
    /* What to do; fixed once submitted. */
    woolly_token *prompt; /* owned */
    int32_t n_prompt;
    woolly_sampler_params sp;
    srv_logit_bias bias;
    int32_t max_tokens; /* 0: until the context is full */
    bool ignore_eos;
    char *stop[SRV_MAX_STOP]; /* owned */
    int n_stop;
    bool context_shift; /* a full context forgets the oldest tokens after the first n_keep and goes on */
    int32_t n_keep;     /* <= n_prompt */
    bool logprobs;    /* record each generated token's log-probability (logprobs.h) */
    int top_logprobs; /* and its step's k most likely tokens, 0 .. SRV_MAX_TOP_LOGPROBS */
    /* Constrains the output, or NULL. The leader owns it; a follower borrows its leader's (immutable, and
     * kept alive by the follower's reference). Each choice's slot has a sampler of its own, so each choice
     * walks the grammar with its own tokens. */
    woolly_grammar *grammar;
    /* Control tokens written as their vocabulary text, not as nothing: a tools request's call markers
     * (srv_tool_marker_tokens), which its output's parser reads. */
    int32_t spelled[SRV_MAX_SPELLED];
    int n_spelled;

    /* The choices of one request (n > 1) are jobs of one group: the first leads, the others follow it
     * (the prompt's keys and values are copied from the leader's slot rather than evaluated again, and
     * the connection thread waits on the leader for news of any of them). */
    int choice;                                     /* index among the request's choices */
    int n_choices;                                  /* leader: the jobs of its group, itself included */
    struct srv_job *followers[SRV_MAX_CHOICES - 1]; /* leader, while queued: references the scheduler holds */
    struct srv_job *leader; /* follower: its leader (a reference); NULL for a leader */

    /* An embedding (embeddings.c): the prompt is evaluated whole (no cache reused: every token's final
     * hidden state is needed) and nothing is generated. */
    bool embed;
    int32_t n_embd;
    double *embd_sum; /* [n_embd] the engine's sum of the tokens' hidden states */
    float *embd;      /* [n_embd] when done: their mean, L2-normalized */

    atomic_bool cancel; /* set by the connection thread; the engine stops at its next step */

    /* The channel: written by the engine, read by the connection thread, under lock. */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    srv_buf text;      /* everything generated so far */
    size_t *piece_end; /* piece i is text[piece_end[i - 1] .. piece_end[i]) */
    int32_t n_pieces, cap_pieces;
    srv_token_lp *lp; /* with logprobs: one per generated token, recorded before its piece */
    int32_t n_lp, cap_lp;
    srv_finish finish;   /* != NONE: done, nothing more will come */
    char error[256];     /* with SRV_FINISH_ERROR */
    bool shutdown;       /* with SRV_FINISH_ERROR: the server stopped it (another replica may take it) */
    int32_t n_cached;    /* prompt tokens reused from the slot's cache */
    int32_t n_generated; /* completion tokens */
    int32_t n_drafted, n_accepted; /* speculative decoding's guesses checked and kept (set at the finish) */
    uint64_t events;     /* leader: changes of any job of its group, for srv_job_group_wait_locked */
    int refs;
} srv_job;

/* A job with one reference, owning prompt (n tokens). NULL when out of memory (prompt is freed then). */
srv_job *srv_job_new(woolly_token *prompt, int32_t n);
srv_job *srv_job_ref(srv_job *j);
void srv_job_release(srv_job *j);

/* Engine side. A piece of text (already valid UTF-8, may be empty); 0 or -1 when out of memory. */
int srv_job_emit(srv_job *j, const char *text, size_t n);
/* With logprobs: a generated token's log-probabilities, before the piece it completed. 0 or -1 when out of
 * memory. */
int srv_job_logprob(srv_job *j, const srv_token_lp *lp);
/* Records the counts; with the finish reason set, wakes the reader for good. */
void srv_job_progress(srv_job *j, int32_t n_cached, int32_t n_generated);
void srv_job_finish(srv_job *j, srv_finish why, const char *error);
/* Ends it with an error because the server is shutting down. */
void srv_job_finish_shutdown(srv_job *j);

/* Connection side: waits until there are pieces past `seen` or the job is done, at most timeout_ms.
 * Returns true if either holds. Call with j->lock held (it is held again on return). */
bool srv_job_wait_locked(srv_job *j, int32_t seen, int timeout_ms);

/* The leader of j's group (j itself if it leads). */
srv_job *srv_job_lead(srv_job *j);
/* Connection side of a group: waits until the leader's event count is past `seen`, at most timeout_ms.
 * Call with the leader's lock held. Returns whether it moved. */
bool srv_job_group_wait_locked(srv_job *leader, uint64_t seen, int timeout_ms);

const char *srv_finish_name(srv_finish f); /* the API's finish_reason: "stop", "length" or NULL */

#endif
