/* A failed request, as the OpenAI API reports it: an HTTP status and an error object
 * {"error": {"message", "type", "param", "code"}}. Every error the server sends is one of these, with a
 * message that says what was wrong and, where a field was at fault, which one. */
#ifndef WOOLLY_SRV_ERRORS_H
#define WOOLLY_SRV_ERRORS_H

typedef struct srv_error {
    int status;       /* 400, 401, 404, 405, 413, 500, 503 */
    const char *type; /* "invalid_request_error", "authentication_error", "server_error" */
    const char *code; /* NULL, or a machine-readable reason ("context_length_exceeded") */
    char param[64];   /* the request field at fault, "" if none */
    char message[512];
} srv_error;

/* Fills e (if not NULL) and returns -1. The type follows from the status: "authentication_error" for
 * 401, "invalid_request_error" for other statuses below 500, "server_error" from 500 on. */
int srv_fail(srv_error *e, int status, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
