/* The OpenAI API's response objects, as jansson values: chat.completion and chat.completion.chunk,
 * text_completion (whole and streamed), usage, the model list, and the error object. The shapes follow
 * the API reference field for field, so that its clients parse them. */
#ifndef WOOLLY_SRV_OAI_H
#define WOOLLY_SRV_OAI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "errors.h"
#include "request.h"

/* What every object of one response shares. */
typedef struct srv_oai_head {
    enum srv_gen_kind kind;
    char id[48]; /* "chatcmpl-..." or "cmpl-..." */
    long long created;
    const char *model;
} srv_oai_head;

void srv_oai_head_init(srv_oai_head *h, enum srv_gen_kind kind, const char *model);

/* {"error": {"message", "type", "param", "code"}} */
json_t *srv_oai_error(const srv_error *e);
/* {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}} */
json_t *srv_oai_usage(int32_t prompt, int32_t completion, int32_t cached);
/* One choice of a whole response; logprobs (taken) NULL gives null. text must be UTF-8. */
json_t *srv_oai_choice(enum srv_gen_kind kind, int index, const char *text, size_t len, const char *finish,
                       json_t *logprobs);
/* A chat choice whose message calls tools: content the text before the calls (NULL or empty: null),
 * tool_calls (taken) as srv_tool_calls_parse gives them. */
json_t *srv_oai_choice_calls(int index, const char *content, size_t len, json_t *tool_calls,
                             const char *finish, json_t *logprobs);
/* The whole response with its choices and usage (both taken). */
json_t *srv_oai_response(const srv_oai_head *h, json_t *choices, json_t *usage);
/* The whole response of one choice without logprobs (takes usage). text must be UTF-8. */
json_t *srv_oai_result(const srv_oai_head *h, const char *text, size_t len, const char *finish,
                       json_t *usage);

/* One streamed chunk: the opening one (role = true: the chat delta's role), a piece of text, or the
 * closing one (finish != NULL). usage_null adds "usage": null, as the API does when the stream will
 * end with a usage chunk. */
json_t *srv_oai_chunk(const srv_oai_head *h, bool role, const char *text, size_t len, const char *finish,
                      bool usage_null);
/* A chat chunk that streams tool call k of a choice: the first one of a call carries its id, type and
 * name with empty arguments (first = true), the next ones fragments of its arguments. */
json_t *srv_oai_chunk_call(const srv_oai_head *h, int k, const json_t *call, bool first, const char *args,
                           size_t len, bool usage_null);
/* Sets a chunk's choice index and (when not NULL; taken) its logprobs. */
void srv_oai_chunk_choice(json_t *chunk, int index, json_t *logprobs);
/* The last chunk of a stream with include_usage: no choices, the usage (taken). */
json_t *srv_oai_usage_chunk(const srv_oai_head *h, json_t *usage);

/* GET /v1/models and GET /v1/models/{id}. */
json_t *srv_oai_model(const char *id, long long created);
json_t *srv_oai_model_list(const char *id, long long created);

#endif
