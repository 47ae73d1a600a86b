/* The chat-template flags of `woolly chat` and `woolly serve`: a built-in format by name
 * (--chat-template), or a Jinja template from a file (--chat-template-file) in place of the model's
 * tokenizer.chat_template, e.g. a fixed version of a published template. */
#ifndef WOOLLY_CLI_TEMPLATE_H
#define WOOLLY_CLI_TEMPLATE_H

#include <stdbool.h>

#include "cli_common.h"

typedef struct cli_template_opts {
    const char *name; /* --chat-template NAME, or NULL */
    const char *file; /* --chat-template-file FILE, or NULL */
} cli_template_opts;

/* --chat-template NAME (name_help says what it chooses) and --chat-template-file FILE. */
void cli_add_template_flags(cli_table *t, cli_template_opts *o, const char *name_help);

/* *forced: the built-in family named (-1: none); *text: the file's template (heap; NULL without the
 * file). False after a message: both flags given, or the file unreadable or empty. */
bool cli_template_finish(const char *cmd, const cli_template_opts *o, int *forced, char **text);

#endif
