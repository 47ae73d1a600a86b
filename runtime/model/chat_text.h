/* A growing heap string for the chat code that writes text piece by piece (the render context's JSON,
 * the tool turns of the built-in formats). After a failed allocation it keeps its last text and sets
 * oom; the caller checks oom once at the end. */
#ifndef WOOLLY_CHAT_TEXT_H
#define WOOLLY_CHAT_TEXT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct chat_text {
    char *p;
    size_t len, cap;
    bool oom;
} chat_text;

void chat_text_put(chat_text *t, const char *s, size_t n);
void chat_text_puts(chat_text *t, const char *s);
/* s as a JSON string, quoted and escaped (NULL as ""). */
void chat_text_json(chat_text *t, const char *s);

#endif
