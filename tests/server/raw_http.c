#include "raw_http.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int rh_connect(int port, const char *from)
{
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    if (from) {
        struct sockaddr_in local = {.sin_family = AF_INET};
        inet_pton(AF_INET, from, &local.sin_addr);
        cr_assert(bind(fd, (struct sockaddr *)&local, sizeof local) == 0, "cannot bind to %s: %s", from,
                  strerror(errno));
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        cr_assert(errno == ECONNREFUSED, "connect: %s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

bool rh_send(int fd, const char *s, size_t n)
{
    while (n > 0) {
        const ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
        if (k <= 0)
            return false;
        s += k;
        n -= (size_t)k;
    }
    return true;
}

static void append(char **buf, size_t *len, const char *data, size_t n)
{
    *buf = realloc(*buf, *len + n + 1);
    cr_assert(*buf != NULL);
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = 0;
}

char *rh_read_all(int fd, int timeout_ms, bool *closed)
{
    char *buf = NULL;
    size_t len = 0;
    append(&buf, &len, "", 0);
    *closed = false;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, timeout_ms) <= 0)
            return buf;
        char chunk[4096];
        const ssize_t k = recv(fd, chunk, sizeof chunk, 0);
        if (k <= 0) {
            *closed = true;
            return buf;
        }
        append(&buf, &len, chunk, (size_t)k);
    }
}

char *rh_read_response(int fd, int timeout_ms)
{
    char *buf = NULL;
    size_t len = 0;
    append(&buf, &len, "", 0);
    for (;;) {
        const char *end = strstr(buf, "\r\n\r\n");
        if (end) {
            const char *cl = strcasestr(buf, "\r\nContent-Length:");
            const size_t body = cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0;
            if (len >= (size_t)(end + 4 - buf) + body)
                return buf;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char chunk[4096];
        ssize_t k;
        if (poll(&p, 1, timeout_ms) <= 0 || (k = recv(fd, chunk, sizeof chunk, 0)) <= 0) {
            free(buf);
            return NULL;
        }
        append(&buf, &len, chunk, (size_t)k);
    }
}

bool rh_closed(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0)
        return false;
    char c[512];
    const ssize_t k = recv(fd, c, sizeof c, MSG_DONTWAIT);
    return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

int rh_status(const char *response)
{
    int status = 0;
    if (!response || sscanf(response, "HTTP/1.%*d %d", &status) != 1)
        return 0;
    return status;
}
