/* POST /v1/embeddings: the input (a string, a list of strings, a list of token ids or a list of such
 * lists) evaluated by the slots like prompts, several inputs side by side in one batch, each pooled into
 * one vector: the mean of its tokens' final hidden states (after the output norm), L2-normalized. */
#ifndef WOOLLY_SRV_EMBEDDINGS_H
#define WOOLLY_SRV_EMBEDDINGS_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "http.h"
#include "routes.h"

/* Inputs one request may hold (as the OpenAI API allows). */
#define SRV_MAX_EMBED_INPUTS 2048

typedef struct srv_embed_request {
    woolly_token **ids; /* [n] each input's tokens (owned) */
    int32_t *len;       /* [n] */
    int n;
    bool base64; /* encoding_format "base64": each vector as the base64 of its little-endian float32s */
} srv_embed_request;

/* Parses and tokenizes a request body (strings with BOS as the vocabulary asks, control tokens not
 * parsed). 0, or -1 with a 400 naming the field (404 for another model); out is always safe to free. */
int srv_embed_request_parse(const srv_app *app, const char *body, size_t len, int32_t n_ctx,
                            srv_embed_request *out, srv_error *err);
void srv_embed_request_free(srv_embed_request *r);

/* Standard base64 (RFC 4648, padded) of n bytes, appended to out. 0 or -1. */
int srv_base64(const unsigned char *bytes, size_t n, srv_buf *out);

void srv_embeddings(srv_app *app, srv_req *r);

#endif
