/* The HTTP layer, on libmicrohttpd: a daemon with one thread per connection, bound to one address.
 * Each request's body is collected (up to a size limit: a larger body is discarded as it arrives and
 * the request is marked too large), then the handler is called once, in the connection's thread, and
 * answers with exactly one srv_respond_* call. A handler may block (a generation request waits for its
 * tokens): only its own connection waits. Headers larger than the limit, idle connections past the
 * timeout and connections past the limits (in all, and from one address) are refused by the daemon
 * itself; a request head not complete within its deadline is cut (conn_guard.h); a request whose length
 * is ambiguous (two Content-Length values, or Content-Length beside Transfer-Encoding: what a proxy in
 * front may read differently, smuggling a second request) gets 400 and its connection is closed. */
#ifndef WOOLLY_SRV_HTTP_H
#define WOOLLY_SRV_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "errors.h"
#include "text.h"

typedef struct srv_http srv_http;
typedef struct srv_req srv_req;

typedef struct srv_http_config {
    const char *host;  /* an IPv4 or IPv6 address or a host name */
    int port;          /* 0: any free port (see srv_http_port) */
    size_t max_body;   /* bytes */
    size_t max_header; /* bytes of request line and headers */
    int timeout_s;     /* idle connections are closed after it */
    int head_timeout_s; /* a request head must be complete within it (0: no deadline) */
    int max_connections;
    int max_per_address; /* connections from one client address; 0: no limit of its own */
    const char *replica; /* named in every response's X-Woolly-Replica header (copied); NULL: none */
} srv_http_config;

typedef void (*srv_handler)(void *ud, srv_req *r);

srv_http *srv_http_start(const srv_http_config *cfg, srv_handler h, void *ud, woolly_error *err);
int srv_http_port(const srv_http *h);
/* Stops accepting connections (the ones open go on). */
void srv_http_quiesce(srv_http *h);
/* Stops accepting connections, and every response from now on closes its connection. */
void srv_http_drain(srv_http *h);
/* Requests between their head and the end of their response (streams included). */
int srv_http_in_flight(const srv_http *h);
/* Connections cut because their request head was late. */
unsigned long srv_http_heads_cut(const srv_http *h);
/* Closes every connection and waits for their threads. */
void srv_http_stop(srv_http *h);

const char *srv_req_method(const srv_req *r);
const char *srv_req_path(const srv_req *r);
const char *srv_req_header(const srv_req *r, const char *name); /* NULL if absent */
/* The body (NUL-terminated, may hold NULs itself); NULL with *len 0 if there was none. */
const char *srv_req_body(const srv_req *r, size_t *len);
bool srv_req_body_too_large(const srv_req *r);
size_t srv_req_max_body(const srv_req *r);
/* The status of the response queued, 0 before. */
int srv_req_status(const srv_req *r);

/* Whether the client of a connection has closed it (or the connection broke): a handler that waits
 * polls it to stop work nobody will receive. */
bool srv_req_client_gone(const srv_req *r);

/* Closes the connection without a response (its client is gone). */
void srv_req_abort(srv_req *r);

/* A header every response to this request carries (name and value must outlive the response's
 * queuing: a header of the request itself, a constant). */
void srv_req_reply_header(srv_req *r, const char *name, const char *value);

/* Closes the connection after this request's response (no keep-alive). */
void srv_req_close_after(srv_req *r);

/* Responses; each takes ownership of its body. header/value: one extra header, or NULL. */
void srv_respond_json(srv_req *r, int status, json_t *body, const char *header, const char *value);
/* The API's error object with e's status; a 503 says when to retry (Retry-After). */
void srv_respond_error(srv_req *r, const srv_error *e);
void srv_respond_text(srv_req *r, int status, const char *content_type, srv_buf *text);

/* A server-sent-events response of unknown length (chunked). next() is called in the connection's
 * thread whenever the previous bytes are sent: it appends the next bytes to out and returns 0, returns
 * 1 when the stream is complete (after appending its last bytes), -1 to abort the connection. It may
 * block, and should return -1 when srv_stream_client_gone says the client left. done() is called once
 * when the response is finished or the connection closes, whichever way. */
typedef struct srv_stream srv_stream;
typedef int (*srv_stream_next)(void *ud, srv_stream *s, srv_buf *out);
typedef void (*srv_stream_done)(void *ud);
void srv_respond_stream(srv_req *r, srv_stream_next next, srv_stream_done done, void *ud);
bool srv_stream_client_gone(const srv_stream *s);
/* The daemon closes a connection that sends nothing for its idle timeout, even a stream that is only
 * waiting for its next token: next() should send something (an SSE comment) at least this often. */
int srv_stream_keepalive_ms(const srv_stream *s);

#endif
