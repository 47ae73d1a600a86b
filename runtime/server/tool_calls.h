/* Tool calls: a chat request's `tools` and `tool_choice` checked, the grammar that holds the output to a
 * call when the request requires one, and the model's output parsed back into the API's tool_calls.
 * Each family writes calls in its own syntax (woolly_chat_tool_syntax in model/chat.h); the parser takes
 * that syntax with or without its marker (a control token in most vocabularies decodes to no text). */
#ifndef WOOLLY_SRV_TOOL_CALLS_H
#define WOOLLY_SRV_TOOL_CALLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "chat.h"
#include "errors.h"
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
} srv_tools;

/* Reads body.tools and body.tool_choice (a 400 naming the field for a malformed tool, a parameter schema
 * the JSON Schema compiler refuses, a tool_choice that is malformed, names an unknown function or asks
 * for a call without tools). With "required" or a named function, *grammar (else NULL) holds the output
 * to one call in `syntax`. 0 or -1. */
int srv_tools_parse(const json_t *body, enum woolly_chat_tool_syntax syntax, srv_tools *out,
                    woolly_grammar **grammar, srv_error *err);
void srv_tools_free(srv_tools *t);

/* The GBNF of one call in `syntax` of a tool of `tools` (the request's array), or of the one named
 * `only` (NULL: any). NULL with a message in err (heap text otherwise). */
char *srv_tool_call_gbnf(enum woolly_chat_tool_syntax syntax, const json_t *tools, const char *only,
                         char *err, size_t err_cap);

/* The calls in a model's output: the API's tool_calls array ([{id, type, function: {name, arguments}}],
 * arguments a JSON text), or NULL when the output holds no call that parses (then it is all content).
 * *content_end: the output's bytes before the first call that are content (trailing space dropped). */
json_t *srv_tool_calls_parse(enum woolly_chat_tool_syntax syntax, const char *text, size_t len,
                             size_t *content_end);

/* While streaming: how many bytes of the output so far may go out as content, the rest possibly being
 * the beginning of a call. */
size_t srv_tool_calls_content_prefix(enum woolly_chat_tool_syntax syntax, const char *text, size_t len);

#endif
