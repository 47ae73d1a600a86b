#include "text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(srv_buf *b, size_t extra)
{
    if (extra > (size_t)-1 / 2 - b->len)
        return -1;
    const size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int srv_buf_append(srv_buf *b, const void *s, size_t n)
{
    if (reserve(b, n))
        return -1;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

int srv_buf_printf(srv_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve(b, (size_t)n))
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void srv_buf_consume(srv_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->p, b->p + n, b->len - n);
        b->len -= n;
    }
    if (b->p)
        b->p[b->len] = 0;
}

void srv_buf_free(srv_buf *b)
{
    free(b->p);
    *b = (srv_buf){0};
}

size_t srv_utf8_seq_len(const unsigned char *s, size_t n)
{
    if (n == 0)
        return 0;
    const unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* past U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

bool srv_utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        const size_t k = srv_utf8_seq_len(u + i, n - i);
        if (!k)
            return false;
        i += k;
    }
    return true;
}

int srv_buf_append_utf8(srv_buf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t run = 0; /* start of the valid run not yet copied */
    for (size_t i = 0; i < n;) {
        const size_t k = srv_utf8_seq_len(u + i, n - i);
        if (k) {
            i += k;
            continue;
        }
        if (srv_buf_append(b, s + run, i - run) || srv_buf_append(b, "\xEF\xBF\xBD", 3))
            return -1;
        run = ++i;
    }
    return srv_buf_append(b, s + run, n - run);
}
