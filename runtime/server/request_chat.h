/* The messages of a chat request, rendered with the model's chat template (model/chat.h) into the
 * prompt text. */
#ifndef WOOLLY_SRV_REQUEST_CHAT_H
#define WOOLLY_SRV_REQUEST_CHAT_H

#include <jansson.h>

#include "chat.h"
#include "errors.h"
#include "tool_calls.h"

/* Reads body.messages: a non-empty array of {role, content}, role one of system, developer (the API's
 * newer name for system), user, assistant, tool; content a string, an array of text parts, or null for an
 * assistant; an assistant's tool_calls ([{id, type: "function", function: {name, arguments}}]) and a tool
 * result's tool_call_id. Renders them with the tools (the template's `tools`) followed by the opening of
 * the assistant's turn into *prompt (heap). 0 or -1 with a 400 naming the message at fault. When the
 * first message is a system message, *system (heap) is it rendered alone, the beginning of the prompt a
 * context shift keeps; else NULL. */
int srv_chat_prompt(const json_t *body, const woolly_chat_format *fmt, const srv_tools *tools, char **prompt,
                    char **system, srv_error *err);

#endif
