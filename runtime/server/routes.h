/* The endpoints: which path and method go where, the API key check, and the small endpoints (models,
 * health, tokenize, detokenize, metrics). The generation endpoints are in generate.c. */
#ifndef WOOLLY_SRV_ROUTES_H
#define WOOLLY_SRV_ROUTES_H

#include <stdbool.h>

#include "http.h"
#include "metrics.h"
#include "request.h"
#include "scheduler.h"
#include "woolly.h"

/* What the endpoints share; fixed while the server runs. */
typedef struct srv_app {
    woolly_model *model;
    const char *model_id;
    long long created; /* when the model was loaded (the models list's "created") */
    srv_gen_rules rules;
    bool chat_bos;   /* prepend BOS to a rendered chat (the template does not write it) */
    bool fixed_seed; /* a request without a seed takes rules.defaults.seed, else a fresh one */
    srv_scheduler *sched;
    srv_metrics *metrics;
    const char *api_key; /* NULL: no key required */
} srv_app;

/* The srv_handler of the HTTP layer (ud: the srv_app). */
void srv_app_handle(void *app, srv_req *r);

/* POST /v1/chat/completions and /v1/completions. */
void srv_generate(srv_app *app, srv_req *r, enum srv_gen_kind kind);

/* Whether an Authorization header carries the key ("Bearer KEY"), in time that does not depend on
 * where the header differs from the key. */
bool srv_key_matches(const char *authorization, const char *key);

#endif
