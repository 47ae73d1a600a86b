#include "http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "conn_guard.h"
#include "oai.h"

/* A body this many times the limit is refused before it is read: the connection closes after the
 * error. Smaller excess is read and discarded first, so that the client, still sending, is not reset
 * before it can read the 413. */
enum { EARLY_REFUSAL_FACTOR = 64, STREAM_BLOCK = 4096 };

struct srv_http {
    struct MHD_Daemon *daemon;
    srv_conn_guard *guard; /* NULL: no head deadline */
    srv_http_config cfg; /* cfg.replica: the copy below */
    char *replica;
    srv_handler handler;
    void *ud;
    int port;
    atomic_int in_flight;
    atomic_bool draining;
    bool quiesced; /* set by the one thread that stops the server */
};

struct srv_req {
    srv_http *http;
    struct MHD_Connection *conn;
    const char *method, *path; /* owned by the daemon, valid for the request's life */
    int fd;
    srv_buf body;
    bool too_large, handled, aborted, close;
    int status;
    const char *reply_name, *reply_value; /* srv_req_reply_header */
};

struct srv_stream {
    int fd;
    int keepalive_ms;
    srv_stream_next next;
    srv_stream_done done;
    void *ud;
    srv_buf buf;
    size_t sent;
    bool ended;
};

static bool fd_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

static void handle(srv_http *h, srv_req *r)
{
    r->handled = true;
    h->handler(h->ud, r);
    if (!r->status && !r->aborted) {
        srv_error e;
        srv_fail(&e, 500, NULL, NULL, "the server did not answer this request");
        srv_respond_error(r, &e);
    }
}

static srv_conn_entry *guard_entry(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    srv_http *h = cls;
    if (!h->guard)
        return;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = ci ? srv_conn_guard_open(h->guard, ci->connect_fd) : NULL;
    } else {
        srv_conn_guard_close(h->guard, *socket_context);
        *socket_context = NULL;
    }
}

typedef struct length_headers {
    int content_length, transfer_encoding;
    const char *first_length;
    bool lengths_differ;
} length_headers;

static enum MHD_Result count_length_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                           const char *value)
{
    (void)kind;
    length_headers *c = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        if (c->content_length++ == 0)
            c->first_length = value;
        else if (strcmp(value ? value : "", c->first_length ? c->first_length : ""))
            c->lengths_differ = true;
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        c->transfer_encoding++;
    }
    return MHD_YES;
}

/* A body whose length two readers could take differently: a proxy in front and this server would then
 * disagree on where the next request starts. NULL if the length is unambiguous, else why not. */
static const char *ambiguous_length(struct MHD_Connection *conn)
{
    length_headers c = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_length_header, &c);
    if (c.content_length && c.transfer_encoding)
        return "the request has both Content-Length and Transfer-Encoding";
    if (c.content_length > 1)
        return c.lengths_differ ? "the request has two different Content-Length headers"
                                : "the request has more than one Content-Length header";
    if (c.transfer_encoding > 1)
        return "the request has more than one Transfer-Encoding header";
    return NULL;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *data, size_t *size, void **con_cls)
{
    (void)version;
    srv_http *h = cls;
    srv_req *r = *con_cls;
    if (!r) { /* the headers are in: the body, if any, follows in later calls */
        if (!(r = calloc(1, sizeof *r)))
            return MHD_NO;
        *r = (srv_req){.http = h, .conn = conn, .method = method, .path = url, .fd = -1};
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci)
            r->fd = ci->connect_fd;
        *con_cls = r;
        atomic_fetch_add(&h->in_flight, 1);
        if (h->guard)
            srv_conn_guard_head_done(h->guard, guard_entry(conn));
        const char *why = ambiguous_length(conn);
        if (why) {
            r->handled = true;
            r->close = true;
            srv_error e;
            srv_fail(&e, 400, "ambiguous_length", NULL, "%s: its length is ambiguous", why);
            srv_respond_error(r, &e);
            return r->status ? MHD_YES : MHD_NO;
        }
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end;
            const unsigned long long n = strtoull(cl, &end, 10);
            if (n > h->cfg.max_body)
                r->too_large = true;
            if (n / EARLY_REFUSAL_FACTOR > h->cfg.max_body)
                handle(h, r);
        }
        return MHD_YES;
    }
    if (*size) {
        if (!r->too_large && !r->handled) {
            if (r->body.len + *size > h->cfg.max_body) {
                r->too_large = true;
                srv_buf_free(&r->body);
            } else if (srv_buf_append(&r->body, data, *size)) {
                return MHD_NO;
            }
        }
        *size = 0;
        return MHD_YES;
    }
    if (!r->handled)
        handle(h, r);
    return r->status ? MHD_YES : MHD_NO;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode why)
{
    (void)why;
    srv_http *h = cls;
    srv_req *r = *con_cls;
    if (!r)
        return;
    atomic_fetch_sub(&h->in_flight, 1);
    if (h->guard)
        srv_conn_guard_request_done(h->guard, guard_entry(conn));
    srv_buf_free(&r->body);
    free(r);
    *con_cls = NULL;
}

static int resolve(const char *host, int port, struct sockaddr_storage *sa, socklen_t *len, woolly_error *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    const int rc = getaddrinfo(host, service, &hints, &res);
    if (rc || !res)
        return woolly_fail(err, "cannot resolve the host '%s': %s", host, gai_strerror(rc));
    memcpy(sa, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

srv_http *srv_http_start(const srv_http_config *cfg, srv_handler handler, void *ud, woolly_error *err)
{
    struct sockaddr_storage sa;
    socklen_t sa_len;
    if (resolve(cfg->host, cfg->port, &sa, &sa_len, err))
        return NULL;
    srv_http *h = calloc(1, sizeof *h);
    if (!h) {
        woolly_fail(err, "out of memory");
        return NULL;
    }
    *h = (srv_http){.cfg = *cfg, .handler = handler, .ud = ud};
    if (cfg->replica && !(h->cfg.replica = h->replica = strdup(cfg->replica))) {
        woolly_fail(err, "out of memory");
        free(h);
        return NULL;
    }
    atomic_init(&h->in_flight, 0);
    atomic_init(&h->draining, false);
    if (cfg->head_timeout_s > 0 &&
        !(h->guard = srv_conn_guard_start(cfg->head_timeout_s * 1000, cfg->timeout_s * 1000, err))) {
        free(h->replica);
        free(h);
        return NULL;
    }
    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC;
    if (sa.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->daemon = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_access, h, MHD_OPTION_SOCK_ADDR,
                                 (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                                 MHD_OPTION_CONNECTION_MEMORY_LIMIT, cfg->max_header,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->timeout_s,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
                                 MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->max_per_address,
                                 MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, MHD_OPTION_END);
    if (!h->daemon) {
        woolly_fail(err, "cannot listen on %s port %d (in use, or not an address of this machine?)",
                    cfg->host, cfg->port);
        srv_conn_guard_stop(h->guard);
        free(h->replica);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_storage bound;
    socklen_t bound_len = sizeof bound;
    if (di && !getsockname(di->listen_fd, (struct sockaddr *)&bound, &bound_len))
        h->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                    : ((struct sockaddr_in *)&bound)->sin_port);
    return h;
}

int srv_http_port(const srv_http *h)
{
    return h->port;
}

void srv_http_quiesce(srv_http *h)
{
    if (h->quiesced)
        return;
    h->quiesced = true;
    const MHD_socket fd = MHD_quiesce_daemon(h->daemon);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

void srv_http_drain(srv_http *h)
{
    atomic_store(&h->draining, true);
    srv_http_quiesce(h);
}

int srv_http_in_flight(const srv_http *h)
{
    return atomic_load(&h->in_flight);
}

unsigned long srv_http_heads_cut(const srv_http *h)
{
    return h->guard ? srv_conn_guard_cut(h->guard) : 0;
}

void srv_http_stop(srv_http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->daemon); /* every connection closed, so every guard entry too */
    srv_conn_guard_stop(h->guard);
    free(h->replica);
    free(h);
}

const char *srv_req_method(const srv_req *r)
{
    return r->method;
}
const char *srv_req_path(const srv_req *r)
{
    return r->path;
}
const char *srv_req_header(const srv_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}
const char *srv_req_body(const srv_req *r, size_t *len)
{
    *len = r->body.len;
    return r->body.p;
}
bool srv_req_body_too_large(const srv_req *r)
{
    return r->too_large;
}
size_t srv_req_max_body(const srv_req *r)
{
    return r->http->cfg.max_body;
}
int srv_req_status(const srv_req *r)
{
    return r->status;
}
bool srv_req_client_gone(const srv_req *r)
{
    return fd_gone(r->fd);
}

static void queue(srv_req *r, int status, struct MHD_Response *resp, const char *type, const char *header,
                  const char *value)
{
    if (!resp)
        return; /* out of memory: the handler's caller closes the connection */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (header)
        MHD_add_response_header(resp, header, value);
    if (r->reply_name)
        MHD_add_response_header(resp, r->reply_name, r->reply_value);
    if (r->http->replica) /* which replica answered, for a client or a log behind a balancer */
        MHD_add_response_header(resp, "X-Woolly-Replica", r->http->replica);
    if (r->close || atomic_load(&r->http->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    if (MHD_queue_response(r->conn, (unsigned)status, resp) == MHD_YES)
        r->status = status;
    MHD_destroy_response(resp);
}

void srv_respond_json(srv_req *r, int status, json_t *body, const char *header, const char *value)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text)
        return;
    queue(r, status, MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE),
          "application/json", header, value);
}

void srv_respond_error(srv_req *r, const srv_error *e)
{
    srv_respond_json(r, e->status, srv_oai_error(e), e->status == 503 ? MHD_HTTP_HEADER_RETRY_AFTER : NULL,
                     "1");
}

void srv_req_reply_header(srv_req *r, const char *name, const char *value)
{
    r->reply_name = name;
    r->reply_value = value;
}

void srv_req_close_after(srv_req *r)
{
    r->close = true;
}

void srv_req_abort(srv_req *r)
{
    r->aborted = true;
}

void srv_respond_text(srv_req *r, int status, const char *content_type, srv_buf *text)
{
    queue(r, status,
          MHD_create_response_from_buffer(text->len, text->p ? text->p : "", MHD_RESPMEM_MUST_COPY),
          content_type, NULL, NULL);
    srv_buf_free(text);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    srv_stream *s = cls;
    while (s->sent == s->buf.len) {
        if (s->ended)
            return MHD_CONTENT_READER_END_OF_STREAM;
        s->buf.len = 0;
        s->sent = 0;
        const int rc = s->next(s->ud, s, &s->buf);
        if (rc < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        s->ended = rc == 1;
    }
    const size_t n = s->buf.len - s->sent < max ? s->buf.len - s->sent : max;
    memcpy(buf, s->buf.p + s->sent, n);
    s->sent += n;
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    srv_stream *s = cls;
    s->done(s->ud);
    srv_buf_free(&s->buf);
    free(s);
}

void srv_respond_stream(srv_req *r, srv_stream_next next, srv_stream_done done, void *ud)
{
    srv_stream *s = calloc(1, sizeof *s);
    if (!s) {
        done(ud);
        return;
    }
    const int half = r->http->cfg.timeout_s * 500;
    *s = (srv_stream){
        .fd = r->fd, .keepalive_ms = half > 500 ? half : 500, .next = next, .done = done, .ud = ud};
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_read, s, stream_free);
    if (!resp) {
        stream_free(s);
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    queue(r, 200, resp, "text/event-stream", NULL, NULL);
}

bool srv_stream_client_gone(const srv_stream *s)
{
    return fd_gone(s->fd);
}

int srv_stream_keepalive_ms(const srv_stream *s)
{
    return s->keepalive_ms;
}
