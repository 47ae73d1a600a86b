/* Tool definitions, calls and results for the built-in chat formats (chat.h), which know only plain
 * system, user and assistant turns: the conversation is lowered to such turns, the tools described in
 * the system prompt and the calls written in the family's tool syntax, then rendered as usual. A model's
 * own template needs none of this: it gets the tools and the messages' tool parts as variables. */
#ifndef WOOLLY_CHAT_TOOLS_H
#define WOOLLY_CHAT_TOOLS_H

#include <stdbool.h>
#include <stddef.h>

#include "chat.h"

/* Whether a message carries tool calls or is a tool result. */
bool woolly_chat_has_tool_parts(const woolly_chat_msg *m, const woolly_chat_msg_tools *parts, size_t n);

/* A lowered conversation: msgs[0 .. n) and the strings they point to. */
typedef struct woolly_chat_lowered {
    woolly_chat_msg *msgs;
    size_t n;
    char **owned;
    size_t n_owned;
} woolly_chat_lowered;

/* Lowers m[0 .. n) with tools[0 .. n_tools) (JSON texts) for family f. 0, or -1 when out of memory. */
int woolly_chat_lower_tools(enum woolly_chat_family f, const woolly_chat_msg *m,
                            const woolly_chat_msg_tools *parts, size_t n, const char *const *tools,
                            size_t n_tools, woolly_chat_lowered *out);
void woolly_chat_lowered_free(woolly_chat_lowered *l);

#endif
