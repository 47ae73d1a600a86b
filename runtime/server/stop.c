#include "stop.h"

#include <string.h>

void srv_stop_init(srv_stop *s, char *const *words, int n)
{
    *s = (srv_stop){0};
    for (int i = 0; i < n && i < SRV_MAX_STOP; i++) {
        const size_t len = strlen(words[i]);
        if (len == 0)
            continue;
        s->words[s->n] = words[i];
        s->lens[s->n++] = len;
    }
}

/* Length of the longest tail of t[0..n) that is a proper beginning of some stop string. */
static size_t held_tail(const srv_stop *s, const char *t, size_t n)
{
    size_t best = 0;
    for (int w = 0; w < s->n; w++) {
        const size_t max = s->lens[w] - 1 < n ? s->lens[w] - 1 : n;
        for (size_t k = max; k > best; k--)
            if (!memcmp(t + n - k, s->words[w], k)) {
                best = k;
                break;
            }
    }
    return best;
}

int srv_stop_feed(srv_stop *s, const char *text, size_t n, srv_buf *out)
{
    if (s->n == 0)
        return srv_buf_append(out, text, n);
    if (srv_buf_append(&s->held, text, n))
        return -1;
    const char *h = s->held.p;
    const size_t len = s->held.len;
    size_t first = len; /* earliest position where a stop string starts */
    for (int w = 0; w < s->n; w++) {
        const char *at = memmem(h, len, s->words[w], s->lens[w]);
        if (at && (size_t)(at - h) < first)
            first = (size_t)(at - h);
    }
    if (first < len) {
        const int rc = srv_buf_append(out, h, first);
        s->held.len = 0;
        return rc ? -1 : 1;
    }
    const size_t release = len - held_tail(s, h, len);
    if (srv_buf_append(out, h, release))
        return -1;
    srv_buf_consume(&s->held, release);
    return 0;
}

int srv_stop_flush(srv_stop *s, srv_buf *out)
{
    const int rc = srv_buf_append(out, s->held.p, s->held.len);
    s->held.len = 0;
    return rc;
}

void srv_stop_free(srv_stop *s)
{
    srv_buf_free(&s->held);
}
