/* The hardening seams on their own: the parse budget of srv_json_parse_object (a body of many small
 * values refused with 413, a long string and a full context of token ids accepted, an empty body
 * named), the integer check at 2^63, and the connection guard (a socket whose head is late is shut down; one whose head came, or
 * that is closed first, is not). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn_guard.h"
#include "json_fields.h"

static char *repeat(const char *open, const char *unit, const char *close, size_t total)
{
    char *b = malloc(total + 1);
    cr_assert(b != NULL);
    size_t n = strlen(open);
    memcpy(b, open, n);
    const size_t u = strlen(unit), c = strlen(close);
    while (n + u + c <= total) {
        memcpy(b + n, unit, u);
        n += u;
    }
    memcpy(b + n, close, c);
    b[n + c] = 0;
    return b;
}

Test(server_seams, the_parse_stops_at_its_budget)
{
    srv_error e;
    /* a megabyte of empty objects: a tree of ~70 MB unbounded */
    char *objects = repeat("{\"a\": [", "{},", "{}]}", 1 << 20);
    cr_expect_null(srv_json_parse_object(objects, strlen(objects), 0, &e));
    cr_expect_eq(e.status, 413);
    cr_expect(strstr(e.message, "too many JSON values") != NULL, "%s", e.message);
    free(objects);
    /* a megabyte of text in one string costs about three times its size: within the bound */
    char *text = repeat("{\"a\": \"", "abcdefgh", "\"}", 1 << 20);
    json_t *v = srv_json_parse_object(text, strlen(text), 0, &e);
    cr_expect_not_null(v, "%s", e.message);
    json_decref(v);
    free(text);
    /* 8192 token ids (~40 KiB of text, ~330 KiB of tree) need the room of a context of 8192 */
    char *ids = repeat("{\"prompt\": [", "4242,", "1]}", 8192 * 5 + 16);
    cr_expect_null(srv_json_parse_object(ids, strlen(ids), 0, &e));
    cr_expect_eq(e.status, 413);
    v = srv_json_parse_object(ids, strlen(ids), 64 * 8192, &e);
    cr_expect_not_null(v, "%s", e.message);
    json_decref(v);
    free(ids);
    /* the budget is off outside a parse: jansson still builds large values */
    json_t *big = json_array();
    for (int i = 0; i < 100000; i++)
        cr_assert_eq(json_array_append_new(big, json_integer(i)), 0);
    json_decref(big);
    cr_expect_null(srv_json_parse_object("", 0, 0, &e));
    cr_expect_eq(e.status, 400);
    cr_expect(strstr(e.message, "body is empty") != NULL, "%s", e.message);
}

Test(server_seams, integers_given_as_reals_stop_below_2_pow_63)
{
    static const struct {
        const char *json;
        int rc;
        long long value;
    } CASES[] = {
        {"{\"n\": 9223372036854775808.0}", -1, 0},  /* 2^63: the old check let it through to UB */
        {"{\"n\": 1.8446744073709552e19}", -1, 0}, /* 2^64 */
        {"{\"n\": -9223372036854777856.0}", -1, 0}, /* below -2^63 */
        {"{\"n\": -9223372036854775808.0}", 1, INT64_MIN},
        {"{\"n\": 9223372036854774784.0}", 1, 9223372036854774784LL}, /* the largest double below 2^63 */
        {"{\"n\": 3.0}", 1, 3},
        {"{\"n\": 3.5}", -1, 0},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        srv_error e;
        json_t *o = srv_json_parse_object(CASES[i].json, strlen(CASES[i].json), 0, &e);
        cr_assert_not_null(o);
        long long x = 0;
        cr_expect_eq(srv_json_integer(o, "n", INT64_MIN, INT64_MAX, &x, &e), CASES[i].rc, "%s", CASES[i].json);
        if (CASES[i].rc == 1)
            cr_expect_eq(x, CASES[i].value, "%s", CASES[i].json);
        json_decref(o);
    }
}

static bool peer_closed(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) <= 0)
        return false;
    char c;
    return recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

Test(server_seams, the_guard_cuts_late_heads_only)
{
    woolly_error err = {{0}};
    srv_conn_guard *g = srv_conn_guard_start(200, 200, &err);
    cr_assert_not_null(g, "%s", err.msg);
    int late[2], on_time[2];
    cr_assert(socketpair(AF_UNIX, SOCK_STREAM, 0, late) == 0);
    cr_assert(socketpair(AF_UNIX, SOCK_STREAM, 0, on_time) == 0);
    srv_conn_entry *a = srv_conn_guard_open(g, late[0]);
    srv_conn_entry *b = srv_conn_guard_open(g, on_time[0]);
    srv_conn_guard_head_done(g, b);
    cr_expect(peer_closed(late[1], 5000), "the late head's connection was not shut down");
    cr_expect(!peer_closed(on_time[1], 600), "a connection whose head came was shut down");
    cr_expect_eq(srv_conn_guard_cut(g), 1);
    /* its request over, a kept-alive connection waits for the next head: due again, idle time added */
    srv_conn_guard_request_done(g, b);
    cr_expect(peer_closed(on_time[1], 5000), "the next head's deadline was not kept");
    cr_expect_eq(srv_conn_guard_cut(g), 2);
    srv_conn_guard_close(g, a);
    srv_conn_guard_close(g, b);
    srv_conn_guard_stop(g);
    for (int i = 0; i < 2; i++) {
        close(late[i]);
        close(on_time[i]);
    }
}
