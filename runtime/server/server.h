/* `woolly serve`: an OpenAI-compatible HTTP server on one loaded model. It ties the parts together:
 * the HTTP layer (http.h), the endpoints (routes.h, generate.c), and the scheduler with its slots
 * (scheduler.h, slot.h), each slot a woolly_context of its own on the shared model. */
#ifndef WOOLLY_SERVER_H
#define WOOLLY_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "woolly.h"

typedef struct woolly_server woolly_server;

typedef struct woolly_server_config {
    woolly_model *model;       /* shared by every slot; the caller keeps it open while the server runs */
    const char *model_id;      /* the name requests and the models list use */
    const char *host;          /* address to bind (default 127.0.0.1) */
    int port;                  /* 0: any free port */
    int parallel;              /* slots; 0: woolly_server_default_parallel */
    int queue;                 /* requests that may wait for a slot; past them, 503 */
    woolly_context_params ctx; /* of each slot */
    const char *api_key;       /* NULL: none; else required on every endpoint but /health */
    size_t max_body;           /* bytes of a request body */
    size_t max_header;         /* bytes of a request's line and headers */
    int32_t max_tokens;        /* per request; 0: the context size */
    int timeout_s;             /* idle connections are closed after it */
    int head_timeout_s;        /* a request head must be complete within it (0: no deadline) */
    int max_connections;
    int max_per_address;       /* connections from one client address (0: no limit of its own) */
    const char *affinity_header; /* the session header a balancer hashes on; NULL: none */
    const char *replica;       /* the replica's name in /metrics; NULL: host:port */
    woolly_sampler_params defaults; /* for the sampling fields a request leaves out */
    bool fixed_seed;                /* requests without a seed use defaults.seed, not a fresh one each */
    /* the logit_bias of requests that give none: bias[i] added to token bias_ids[i]'s logit (at most
     * SRV_MAX_LOGIT_BIAS; the caller keeps the arrays) */
    const woolly_token *bias_ids;
    const float *bias;
    int32_t n_bias;
    int chat_family;                /* enum woolly_chat_family, or -1: recognized from the model */
    const char *chat_template;      /* Jinja text rendered instead of the model's template, or NULL */
    bool context_shift; /* a full context forgets the oldest tokens after the kept ones (the request's
                           n_keep, else a chat's system message, else BOS) and generation goes on */
    /* Speculative decoding (server/spec.h): a draft model with the model's vocabulary (the caller keeps
     * it open; NULL: none) and/or prompt lookup over n-grams of `lookup` tokens (0: none), at most
     * draft_max guesses per slot and step (1 .. 64). Not with context_shift. */
    woolly_model *draft;
    int32_t lookup, draft_max;
    bool draft_fixed; /* always draft_max guesses, no adaptive length (tests: every step checks guesses) */
} woolly_server_config;

woolly_server_config woolly_server_default_config(void);

/* The slots whose KV caches and run state fit in half of the memory available now, at most 4 (one
 * engine runs them in turn: more slots serve more clients at once, each more slowly). At least 1. */
int woolly_server_default_parallel(const woolly_model *m, const woolly_context_params *cp);

/* Starts the HTTP daemon before the model is there: /health answers "loading" (503), the other
 * endpoints 503, until woolly_server_start. Uses the HTTP fields of c, the model's name and the key.
 * NULL with a message. */
woolly_server *woolly_server_listen(const woolly_server_config *c, woolly_error *err);
/* Opens the slots on c->model (committing their caches) and starts the engine: from now on requests are
 * taken and /health says "ok". c's HTTP fields are ignored. -1 with a message. */
int woolly_server_start(woolly_server *s, const woolly_server_config *c, woolly_error *err);
/* Both at once. */
woolly_server *woolly_server_open(const woolly_server_config *c, woolly_error *err);

/* Begins a drain: stops accepting connections; /health says "draining" (503), and a generation
 * request that still arrives on an open connection gets 503 and the connection closes. The requests
 * in flight go on. */
void woolly_server_drain(woolly_server *s);
/* Requests between their head and the end of their response, streams included (0: drained). */
int woolly_server_in_flight(const woolly_server *s);
int woolly_server_port(const woolly_server *s);
int woolly_server_parallel(const woolly_server *s);
int32_t woolly_server_n_ctx(const woolly_server *s);
/* Stops accepting, ends the running requests (each client gets an error: a 503, or an error event in
 * its stream), lets the connection threads write that error (a few seconds at most), closes every
 * connection and frees everything. */
void woolly_server_close(woolly_server *s);

#endif
