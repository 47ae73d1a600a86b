#include "errors.h"

#include <stdarg.h>
#include <stdio.h>

int srv_fail(srv_error *e, int status, const char *code, const char *param, const char *fmt, ...)
{
    if (!e)
        return -1;
    e->status = status;
    e->type = status == 401  ? "authentication_error"
              : status < 500 ? "invalid_request_error"
                             : "server_error";
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}
