/* Raw HTTP over a socket, for the server tests that must send what a well-behaved client library never
 * sends (ambiguous lengths, a head trickled byte by byte) or hold a connection open across a signal.
 * Every failure to connect when a connection is expected is a Criterion assertion. */
#ifndef WOOLLY_TESTS_RAW_HTTP_H
#define WOOLLY_TESTS_RAW_HTTP_H

#include <stdbool.h>
#include <stddef.h>

/* A connected TCP socket to 127.0.0.1:port, from the local address `from` ("127.0.0.2": another
 * client address on the loopback) or NULL; -1 if the connection was refused (other errors assert). */
int rh_connect(int port, const char *from);
/* Sends all of s (false if the connection is gone). */
bool rh_send(int fd, const char *s, size_t n);
/* Reads until the peer closes or timeout_ms passes without a byte; a heap string. *closed says which. */
char *rh_read_all(int fd, int timeout_ms, bool *closed);
/* Reads one response with a Content-Length body (headers and body, a heap string), waiting at most
 * timeout_ms; NULL if the connection closed or timed out first. */
char *rh_read_response(int fd, int timeout_ms);
/* Whether the peer has closed the connection (a read returns 0 or an error; pending bytes are
 * dropped). */
bool rh_closed(int fd);
/* The status of the response text ("HTTP/1.1 503 ..."), 0 if none. */
int rh_status(const char *response);

#endif
