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
    int max_connections;
    woolly_sampler_params defaults; /* for the sampling fields a request leaves out */
    bool fixed_seed;                /* requests without a seed use defaults.seed, not a fresh one each */
    int chat_family;                /* enum woolly_chat_family, or -1: recognized from the model */
} woolly_server_config;

woolly_server_config woolly_server_default_config(void);

/* The slots whose KV caches and run state fit in half of the memory available now, at most 4 (one
 * engine runs them in turn: more slots serve more clients at once, each more slowly). At least 1. */
int woolly_server_default_parallel(const woolly_model *m, const woolly_context_params *cp);

/* Opens the slots, starts the engine and the HTTP daemon. NULL with a message. */
woolly_server *woolly_server_open(const woolly_server_config *c, woolly_error *err);
int woolly_server_port(const woolly_server *s);
int woolly_server_parallel(const woolly_server *s);
int32_t woolly_server_n_ctx(const woolly_server *s);
/* Stops accepting, ends the running requests, closes every connection and frees everything. */
void woolly_server_close(woolly_server *s);

#endif
