/* The endpoints: which path and method go where, the API key check, and the small endpoints (models,
 * health, tokenize, detokenize, metrics). The generation endpoints are in generate.c. */
#ifndef WOOLLY_SRV_ROUTES_H
#define WOOLLY_SRV_ROUTES_H

#include <stdatomic.h>
#include <stdbool.h>

#include "http.h"
#include "metrics.h"
#include "request.h"
#include "scheduler.h"
#include "woolly.h"

/* A replica's state, as /health tells a load balancer: loading (503) until the model is loaded and its
 * caches committed, ready (200), draining (503) from the stop signal on. */
enum srv_state { SRV_LOADING, SRV_READY, SRV_DRAINING };

/* What the endpoints share. The fields past the state are set before the state leaves SRV_LOADING
 * (stored with release, read with acquire) and fixed afterwards; the others are fixed from the start. */
typedef struct srv_app {
    const char *model_id;
    const char *api_key;         /* NULL: no key required */
    const char *affinity_header; /* the session header a balancer hashes on (echoed, counted) */
    srv_metrics *metrics;
    srv_http *http;
    atomic_int state; /* enum srv_state */

    woolly_model *model;
    long long created; /* when the model was loaded (the models list's "created") */
    srv_gen_rules rules;
    srv_logit_bias default_bias; /* rules.default_bias points here */
    bool chat_bos;   /* prepend BOS to a rendered chat (the template does not write it) */
    bool fixed_seed; /* a request without a seed takes rules.defaults.seed, else a fresh one */
    bool context_shift; /* a full context forgets old tokens instead of ending the request */
    bool speculative;   /* speculative decoding: responses carry "timings" with the draft counts */
    srv_scheduler *sched;
} srv_app;

/* The srv_handler of the HTTP layer (ud: the srv_app). */
void srv_app_handle(void *app, srv_req *r);

/* POST /v1/chat/completions and /v1/completions. */
void srv_generate(srv_app *app, srv_req *r, enum srv_gen_kind kind);

/* Whether an Authorization header carries the key ("Bearer KEY"), in time that does not depend on
 * where the header differs from the key. */
bool srv_key_matches(const char *authorization, const char *key);

#endif
