/* A Jinja interpreter for chat templates: the subset of Jinja2 that the published chat templates of
 * GGUF models use (tokenizer.chat_template), with the environment Hugging Face renders them in
 * (trim_blocks, lstrip_blocks, loop controls, tojson with indent/sort_keys, raise_exception,
 * strftime_now). docs/CHAT.md lists what it covers.
 *
 * Bounded: parsing and rendering stop with an error, never crash or run away, on any input: nesting,
 * macro recursion, evaluation steps, memory and output size are capped. Every allocation of a parse or
 * a render lives in one arena freed at once, so an error anywhere (a longjmp out) leaks nothing. */
#ifndef WOOLLY_JINJA_H
#define WOOLLY_JINJA_H

#include <stddef.h>

typedef struct jinja_template jinja_template;

/* Parses a template. NULL on error, with a message naming the line and the construct in err. */
jinja_template *jinja_parse(const char *src, size_t len, char *err, size_t err_cap);
void jinja_free(jinja_template *t);

/* Renders with the variables of `context_json`, a JSON object (e.g. {"messages": [...],
 * "add_generation_prompt": true, "bos_token": "<s>"}). Returns the text (heap, NUL-terminated, free()
 * it) and its length in *len, or NULL with the error in err (a raise_exception's message is quoted). */
char *jinja_render(const jinja_template *t, const char *context_json, size_t *len, char *err, size_t err_cap);

#endif
