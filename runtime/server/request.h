/* The JSON body of a generation request (POST /v1/chat/completions, POST /v1/completions), parsed and
 * checked field by field against the OpenAI API's types and ranges and this server's limits. A field
 * of the wrong type or out of range, a value the server does not support (echo, tools on a completion) or an
 * unknown model is an error naming the field; fields the server does not know are ignored, as the API asks of
 * servers that implement part of it. */
#ifndef WOOLLY_SRV_REQUEST_H
#define WOOLLY_SRV_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "chat.h"
#include "errors.h"
#include "job.h"
#include "stop.h"
#include "tool_calls.h"
#include "woolly.h"

enum srv_gen_kind { SRV_GEN_CHAT, SRV_GEN_COMPLETION };

/* What the server accepts. */
typedef struct srv_gen_rules {
    const char *model_id;           /* the one model name requests may give */
    woolly_sampler_params defaults; /* for the sampling fields a request leaves out */
    const srv_logit_bias *default_bias; /* for a request without logit_bias, or NULL: none */
    int32_t n_vocab;                /* token ids of a prompt must be below it */
    int32_t max_tokens_limit;       /* the most tokens one request may ask for, and what it gets without
                                       asking */
    size_t json_room;               /* see srv_json_parse_object */
    const woolly_chat_format *chat; /* renders the messages of a chat request */
} srv_gen_rules;

typedef struct srv_gen_request {
    enum srv_gen_kind kind;
    bool stream;
    bool include_usage; /* stream_options.include_usage */
    bool ignore_eos;    /* an extension: generate past end-of-generation tokens */
    woolly_sampler_params sp;
    srv_logit_bias bias;
    bool seed_given;
    int32_t max_tokens; /* the request's, else the server's limit; 0 only with a limit of 0 */
    int n_stop;
    char *stop[SRV_MAX_STOP];
    char *prompt;      /* the text to tokenize (the rendered chat, or the completion's prompt) or NULL */
    woolly_token *ids; /* or a completion prompt given as token ids */
    int32_t n_ids;
    /* What a context shift keeps (see --context-shift): n_keep, an extension as llama.cpp's server has
     * it, the prompt tokens after BOS (-1: the whole prompt; SRV_KEEP_DEFAULT: not given, then a chat's
     * system message, system, rendered alone, else BOS only). */
    int32_t n_keep;
    char *system;
    int n;            /* choices, 1 .. SRV_MAX_CHOICES (the server's slots are checked later) */
    bool logprobs;    /* chat: logprobs; completions: logprobs given as a number */
    int top_logprobs; /* chat: top_logprobs; completions: the number logprobs gave */
    woolly_grammar *grammar; /* response_format json_object/json_schema, `grammar` (GBNF), a required tool
                                call (tool_calls.h), or NULL */
    srv_tools tools;         /* a chat's tools and tool_choice */
} srv_gen_request;

enum { SRV_KEEP_DEFAULT = -2 };

/* Parses len bytes of body. 0, or -1 with err set (400, 404 for an unknown model, 500 when out of
 * memory); out is always safe to free. */
int srv_gen_request_parse(const char *body, size_t len, enum srv_gen_kind kind, const srv_gen_rules *r,
                          srv_gen_request *out, srv_error *err);
void srv_gen_request_free(srv_gen_request *r);

#endif
