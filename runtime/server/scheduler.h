/* The scheduler: N slots, each a sequence of one multi-sequence context on the shared model, a bounded
 * queue of jobs waiting for a slot, and one engine thread that runs all busy slots' steps together
 * (continuous batching). Each step is one forward pass over one batch: the next token of every slot
 * that is generating (and its guesses, when speculating: spec.h), plus chunks of the prompts of the
 * slots that have just taken a job, within a prompt budget (the whole batch size when nobody is
 * generating, else SRV_PROMPT_CHUNK tokens), so a long prompt joins over several steps and never stalls
 * the others' decoding for long. Decoding is memory bound: the step's matrix products stream the
 * weights once for all its tokens, so N requests decoding together cost little more than one. Queued
 * jobs take the free slots between steps, each the free slot whose cache holds the longest beginning of
 * its prompt (prompt caching), else the one used least recently.
 *
 * One engine thread rather than a thread per slot: each forward pass already spreads over all cores.
 * This is the one place where forward passes are issued (see slot.h). */
#ifndef WOOLLY_SRV_SCHEDULER_H
#define WOOLLY_SRV_SCHEDULER_H

#include "error.h"
#include "job.h"
#include "metrics.h"
#include "woolly.h"

typedef struct srv_scheduler srv_scheduler;

/* Prompt tokens a step takes while some slot is generating. */
#define SRV_PROMPT_CHUNK 64

typedef struct srv_scheduler_config {
    int n_slots;
    int queue_cap;             /* jobs that may wait for a slot */
    woolly_context_params ctx; /* per slot; its n_batch is raised to n_slots if below */
    /* Speculative decoding (spec.h): a draft model (NULL: none) and/or prompt lookup (n-gram length, 0:
     * none); draft_max guesses per slot and step at most. Neither: no speculation. */
    woolly_model *draft;
    int32_t lookup, draft_max;
    bool draft_fixed; /* always draft_max guesses: no adaptive length (tests) */
} srv_scheduler_config;

/* Opens the slots' context (one sequence per slot) and starts the engine thread. */
srv_scheduler *srv_scheduler_open(woolly_model *m, const srv_scheduler_config *cfg, srv_metrics *metrics,
                                  woolly_error *err);
/* Stops the engine: every job still queued or running finishes as an error ("shutting down"), and
 * later submissions are refused. The scheduler can still be asked for its state and to cancel. */
void srv_scheduler_shutdown(srv_scheduler *s);
/* Shuts down (if not yet) and frees the slots: no connection thread may use the scheduler any more. */
void srv_scheduler_close(srv_scheduler *s);

/* Queues a job (the scheduler takes its own reference). 0, or -1 when every slot is busy and the
 * queue is full, or the server is shutting down. */
int srv_scheduler_submit(srv_scheduler *s, srv_job *j);
/* Queues the jobs of one request's choices as a group: jobs[0] leads (its prompt is evaluated once and
 * copied to the others' slots); the group takes n free slots at once, waiting at the head of the queue
 * until there are. -1 as above, or when n exceeds the slots. n = 1: srv_scheduler_submit. */
int srv_scheduler_submit_group(srv_scheduler *s, srv_job *const *jobs, int n);
/* The client of j went away: a queued job leaves the queue at once, a running one stops at its slot's
 * next step, freeing the slot. */
void srv_scheduler_cancel(srv_scheduler *s, srv_job *j);

typedef struct srv_scheduler_status {
    int slots, busy, queued;
} srv_scheduler_status;
srv_scheduler_status srv_scheduler_state(srv_scheduler *s);
int32_t srv_scheduler_n_ctx(const srv_scheduler *s);

#endif
