/* Errors are values: a function that can fail on bad input fills a woolly_error with a message a user
 * can act on and returns non-zero (or NULL). Nothing in libwoolly aborts on bad input. */
#ifndef WOOLLY_ERROR_H
#define WOOLLY_ERROR_H

#include <stdarg.h>

typedef struct woolly_error {
    char msg[512];
} woolly_error;

/* printf-style; `e` may be NULL (the message is then dropped). Always returns -1 so that callers can
 * write `return woolly_fail(e, "...")`. */
int woolly_fail(woolly_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
