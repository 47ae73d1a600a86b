/* Stop strings: generation ends when the text contains one of them, and the text sent stops just
 * before it. Text that could be the beginning of a stop string is held back until it is clear that it
 * is not, so a streaming client never receives part of a stop string. */
#ifndef WOOLLY_SRV_STOP_H
#define WOOLLY_SRV_STOP_H

#include <stdbool.h>

#include "text.h"

#define SRV_MAX_STOP 4         /* as the OpenAI API allows */
#define SRV_MAX_STOP_BYTES 256 /* per string */

typedef struct srv_stop {
    const char *words[SRV_MAX_STOP]; /* not owned */
    size_t lens[SRV_MAX_STOP];
    int n;
    srv_buf held; /* text not yet released: the longest tail that is the start of a stop string */
} srv_stop;

void srv_stop_init(srv_stop *s, char *const *words, int n);
/* Adds text. Appends to out what can no longer be part of a stop string and returns 0; returns 1 when
 * a stop string has appeared (out then has the text before it, the rest is dropped), -1 when out of
 * memory. */
int srv_stop_feed(srv_stop *s, const char *text, size_t n, srv_buf *out);
/* At the end of generation: releases the held text. */
int srv_stop_flush(srv_stop *s, srv_buf *out);
void srv_stop_free(srv_stop *s);

#endif
