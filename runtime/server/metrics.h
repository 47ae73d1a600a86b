/* The server's counters, served as Prometheus text by GET /metrics: requests by endpoint and status,
 * tokens in and out, cancellations, and the engine's time, from which the prompt and generation rates
 * follow. Updated from the connection threads and the engine thread. */
#ifndef WOOLLY_SRV_METRICS_H
#define WOOLLY_SRV_METRICS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "text.h"

enum srv_endpoint {
    SRV_EP_CHAT,
    SRV_EP_COMPLETIONS,
    SRV_EP_MODELS,
    SRV_EP_HEALTH,
    SRV_EP_TOKENIZE,
    SRV_EP_DETOKENIZE,
    SRV_EP_METRICS,
    SRV_EP_EMBEDDINGS,
    SRV_EP_OTHER,
    SRV_EP_COUNT
};

/* The statuses the server sends, in the order of the counters. */
#define SRV_STATUSES(X) X(200) X(400) X(401) X(404) X(405) X(413) X(431) X(500) X(503)
enum {
#define SRV_STATUS_INDEX(code) SRV_STATUS_##code,
    SRV_STATUSES(SRV_STATUS_INDEX)
#undef SRV_STATUS_INDEX
        SRV_STATUS_OTHER,
    SRV_STATUS_COUNT
};

typedef struct srv_metrics {
    pthread_mutex_t lock;
    uint64_t requests[SRV_EP_COUNT][SRV_STATUS_COUNT];
    uint64_t prompt_tokens;     /* of generation requests that were run */
    uint64_t cached_tokens;     /* of those, found in a slot's cache */
    uint64_t completion_tokens; /* generated */
    uint64_t cancelled;         /* requests whose client went away */
    uint64_t prompt_evaluated;  /* prompt tokens the engine evaluated */
    double prompt_seconds;      /* engine time evaluating prompts */
    uint64_t generation_evaluated;
    double generation_seconds; /* engine time evaluating generated tokens */
    uint64_t steps;            /* forward passes: one batch each */
    uint64_t generation_steps; /* of those, the ones with generated tokens */
    uint64_t session_requests; /* generation requests that named their session (the affinity header) */
    uint64_t session_cached;   /* of those, the ones whose prompt was partly found in a slot's cache */
    bool speculative;          /* the server speculates: the draft counters below are shown */
    uint64_t drafted, accepted; /* speculative decoding's guesses checked, and kept */
    uint64_t draft_passes;      /* the draft model's forward passes */
    char model[128], replica[192]; /* the identity labels of woolly_server_info */
} srv_metrics;

/* What /metrics shows beside the counters, from the caller. */
typedef struct srv_metrics_gauges {
    int slots_total, slots_busy, queued;
    int state; /* enum srv_state (routes.h) */
    unsigned long heads_cut;
} srv_metrics_gauges;

void srv_metrics_init(srv_metrics *m);
/* The labels a scrape of several replicas tells them apart and groups them by: the model's name and
 * the replica's (by default host:port). */
void srv_metrics_identity(srv_metrics *m, const char *model, const char *replica);
/* A finished generation request that named its session: whether its prompt was found cached. */
void srv_metrics_session(srv_metrics *m, int cached);
void srv_metrics_destroy(srv_metrics *m);
void srv_metrics_request(srv_metrics *m, enum srv_endpoint ep, int status);
void srv_metrics_job(srv_metrics *m, int32_t prompt, int32_t cached, int32_t completion, int cancelled);
void srv_metrics_engine(srv_metrics *m, int32_t n_tokens, double seconds, int prompt);
/* A finished job's speculative guesses: checked, and kept (also turns the draft counters on). */
void srv_metrics_draft(srv_metrics *m, int32_t drafted, int32_t accepted);
/* The draft model's forward passes of one step (each one batch of all drafting slots' tokens). */
void srv_metrics_draft_passes(srv_metrics *m, int32_t passes);
/* One forward pass of the engine, with n_gen generated tokens (and prompt tokens besides). */
void srv_metrics_step(srv_metrics *m, int32_t n_gen);
/* Appends the Prometheus text; the gauges come from the caller (the scheduler's state). */
int srv_metrics_render(srv_metrics *m, const srv_metrics_gauges *g, srv_buf *out);

#endif
