/* A deadline for each request head. The HTTP daemon's own timeout is an idle timeout: a client that
 * sends one byte of its headers every few seconds is never idle, and enough of them hold every
 * connection the server allows (slowloris). The guard gives each connection a deadline for a complete
 * request head (from its opening, or from the end of its previous request plus the idle allowance on a
 * kept-alive connection) and shuts down the socket of one that misses it; the daemon then closes it.
 *
 * The HTTP layer reports each connection's events from the daemon's threads; one thread of the guard's
 * own checks the deadlines. */
#ifndef WOOLLY_SRV_CONN_GUARD_H
#define WOOLLY_SRV_CONN_GUARD_H

#include "error.h"

typedef struct srv_conn_guard srv_conn_guard;
typedef struct srv_conn_entry srv_conn_entry;

/* head_ms: the time a new connection has to send a complete request head; idle_ms: what a kept-alive
 * connection may wait before its next request starts (its next head is due within idle_ms + head_ms
 * of the previous request's end). */
srv_conn_guard *srv_conn_guard_start(int head_ms, int idle_ms, woolly_error *err);
/* Stops the checking thread; every entry must have been closed before. */
void srv_conn_guard_stop(srv_conn_guard *g);

/* A connection opened on socket fd; NULL when out of memory (the connection is then not guarded). */
srv_conn_entry *srv_conn_guard_open(srv_conn_guard *g, int fd);
/* Its request head is complete: no deadline until the request ends. */
void srv_conn_guard_head_done(srv_conn_guard *g, srv_conn_entry *e);
/* Its request ended and the connection stays open for another. */
void srv_conn_guard_request_done(srv_conn_guard *g, srv_conn_entry *e);
/* Closed (before its socket is): the entry is freed. */
void srv_conn_guard_close(srv_conn_guard *g, srv_conn_entry *e);
/* Connections cut for a late head so far. */
unsigned long srv_conn_guard_cut(srv_conn_guard *g);

#endif
