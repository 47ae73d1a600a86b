/* The scheduler: N slots on one shared model, a bounded queue of jobs waiting for a slot, and one
 * engine thread that runs the slots' steps in rounds. In a round every busy slot takes one step (a
 * chunk of its prompt, or one generated token), in turn, so long prompts and long generations share
 * the engine fairly; queued jobs take the free slots between rounds, each the free slot whose cache
 * holds the longest beginning of its prompt (prompt caching), else the one used least recently.
 *
 * One engine thread rather than a thread per slot: each context already spreads a forward pass over
 * all cores, so slots running at once would only compete for them; and a slot's tokens come out the
 * same whether it runs alone or beside others (each context is evaluated exactly as `woolly run`
 * evaluates it). This is the one place where forward passes are issued (see slot.h), so that batching
 * the decode steps of all slots into one pass changes only this file. */
#ifndef WOOLLY_SRV_SCHEDULER_H
#define WOOLLY_SRV_SCHEDULER_H

#include "error.h"
#include "job.h"
#include "metrics.h"
#include "woolly.h"

typedef struct srv_scheduler srv_scheduler;

typedef struct srv_scheduler_config {
    int n_slots;
    int queue_cap; /* jobs that may wait for a slot */
    woolly_context_params ctx;
} srv_scheduler_config;

/* Opens the slots' contexts and starts the engine thread. */
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
/* The client of j went away: a queued job leaves the queue at once, a running one stops at its slot's
 * next step, freeing the slot. */
void srv_scheduler_cancel(srv_scheduler *s, srv_job *j);

typedef struct srv_scheduler_status {
    int slots, busy, queued;
} srv_scheduler_status;
srv_scheduler_status srv_scheduler_state(srv_scheduler *s);
int32_t srv_scheduler_n_ctx(const srv_scheduler *s);

#endif
