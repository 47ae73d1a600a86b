/* Tool calls: a chat request's `tools`, `tool_choice` and `parallel_tool_calls` checked, the grammar that
 * holds the output to a call when the request requires one, and the model's output parsed back into the
 * API's tool_calls. Each family writes calls in its own syntax (woolly_chat_tool_syntax in model/chat.h).
 * Its markers are control tokens in most vocabularies, which decode to no text: the engine writes them
 * out in a tools request (srv_tool_marker_tokens), and the parser also takes the syntax without them. */
#ifndef WOOLLY_SRV_TOOL_CALLS_H
#define WOOLLY_SRV_TOOL_CALLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "chat.h"
#include "errors.h"
#include "tokenizer.h"
#include "woolly.h"

enum srv_tool_choice {
    SRV_TOOL_CHOICE_NONE,     /* no tools, or "none": the output is text */
    SRV_TOOL_CHOICE_AUTO,     /* the model may call a tool: its output is parsed */
    SRV_TOOL_CHOICE_REQUIRED, /* it must call one: a grammar holds it to a call of any tool */
    SRV_TOOL_CHOICE_NAMED,    /* it must call this one */
};

typedef struct srv_tools {
    char **texts; /* the tools as compact JSON texts, for the chat template */
    size_t n;
    enum srv_tool_choice choice;
    enum woolly_chat_tool_syntax syntax;
    bool parallel;          /* parallel_tool_calls not false: several calls of a turn are parsed */
    bool parallel_required; /* parallel_tool_calls true: a required call's grammar takes several */
} srv_tools;

/* The most calls the grammar of a required call takes with parallel_tool_calls true: a model held to a
 * grammar may be one that does not know when to stop, and would chain calls until max_tokens. */
#define SRV_MAX_PARALLEL_CALLS 8

/* Reads body.tools, body.tool_choice and body.parallel_tool_calls (a 400 naming the field for a malformed
 * tool, a parameter schema the JSON Schema compiler refuses, a tool_choice that is malformed, names an
 * unknown function or asks for a call without tools, a parallel_tool_calls that is not a boolean). With
 * "required" or a named function, *grammar (else NULL) holds the output to calls in `syntax` (with
 * `named`, Mistral's newer form: srv_tool_call_gbnf): one, or with parallel_tool_calls true up to
 * SRV_MAX_PARALLEL_CALLS where the family's syntax writes several. 0 or -1. */
int srv_tools_parse(const json_t *body, enum woolly_chat_tool_syntax syntax, bool named, srv_tools *out,
                    woolly_grammar **grammar, srv_error *err);
void srv_tools_free(srv_tools *t);

/* The GBNF of a call in `syntax` of a tool of `tools` (the request's array), or of the one named
 * `only` (NULL: any); with `parallel`, of 1 to SRV_MAX_PARALLEL_CALLS calls where the syntax lists
 * several (Hermes' tagged blocks, Mistral's and Granite's arrays; Llama 3's templates document one call a
 * turn). `named` (Mistral only: its templates that write [ARGS]): each call the tool's name, then its
 * arguments object, `name{...}`, the form those models are trained on, rather than the v3 array; the
 * [TOOL_CALLS] and [ARGS] control tokens are left out, as the markers of every syntax are. NULL with a
 * message in err (heap text otherwise). */
char *srv_tool_call_gbnf(enum woolly_chat_tool_syntax syntax, bool named, const json_t *tools,
                         const char *only, bool parallel, char *err, size_t err_cap);

/* The calls in a model's output: the API's tool_calls array ([{id, type, function: {name, arguments}}],
 * arguments a JSON text), or NULL when the output holds no call that parses (then it is all content).
 * Without `parallel` only the first call is kept. *content_end: the output's bytes before the first call
 * that are content (trailing space dropped). */
json_t *srv_tool_calls_parse(enum woolly_chat_tool_syntax syntax, const char *text, size_t len, bool parallel,
                             size_t *content_end);

/* The tokens of `syntax`'s markers ([TOOL_CALLS], <|python_tag|>, ...) that are control tokens in t's
 * vocabulary (their text decodes to nothing): the engine writes their vocabulary text into a tools
 * request's output, so that the parser sees where calls begin and how Mistral's parts are split. Writes
 * at most cap ids; returns their count. */
int srv_tool_marker_tokens(enum woolly_chat_tool_syntax syntax, const woolly_tokenizer *t, int32_t *ids,
                           int cap);

/* While streaming: how many bytes of the output so far may go out as content, the rest possibly being
 * the beginning of a call. */
size_t srv_tool_calls_content_prefix(enum woolly_chat_tool_syntax syntax, const char *text, size_t len);

#endif
