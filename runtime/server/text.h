/* A growable byte buffer, and UTF-8 checking and repair. Generated text can hold byte sequences that
 * are not UTF-8 (a model is free to emit any byte token); JSON strings must be UTF-8, so every piece of
 * text the server sends goes through srv_buf_append_utf8, which replaces each invalid byte with U+FFFD. */
#ifndef WOOLLY_SRV_TEXT_H
#define WOOLLY_SRV_TEXT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct srv_buf {
    char *p; /* NUL-terminated when not NULL */
    size_t len, cap;
} srv_buf;

/* 0, or -1 when out of memory (the buffer is unchanged then). */
int srv_buf_append(srv_buf *b, const void *s, size_t n);
int srv_buf_printf(srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s, each byte that does not start a valid UTF-8 sequence (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF) replaced by U+FFFD. */
int srv_buf_append_utf8(srv_buf *b, const char *s, size_t n);
/* Drops the first n bytes. */
void srv_buf_consume(srv_buf *b, size_t n);
void srv_buf_free(srv_buf *b);

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if s does not start one. */
size_t srv_utf8_seq_len(const unsigned char *s, size_t n);
bool srv_utf8_valid(const char *s, size_t n);

#endif
