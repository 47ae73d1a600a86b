#include "chat_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void chat_text_put(chat_text *t, const char *s, size_t n)
{
    if (t->oom)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) {
            t->oom = true;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = 0;
}

void chat_text_puts(chat_text *t, const char *s)
{
    chat_text_put(t, s, strlen(s));
}

void chat_text_json(chat_text *t, const char *s)
{
    chat_text_put(t, "\"", 1);
    for (; s && *s; s++) {
        const unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            chat_text_put(t, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            chat_text_put(t, esc, 6);
        } else {
            chat_text_put(t, s, 1);
        }
    }
    chat_text_put(t, "\"", 1);
}
