#include "conn_guard.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

/* How often deadlines are checked: a late head is cut at most this much after its deadline. */
enum { CHECK_MS = 100 };

struct srv_conn_entry {
    srv_conn_entry *prev, *next;
    int fd;
    bool waiting; /* for a request head */
    bool cut;
    long long deadline_ms;
};

struct srv_conn_guard {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    srv_conn_entry *head;
    int head_ms, idle_ms;
    unsigned long n_cut;
    bool stop;
    pthread_t thread;
};

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The daemon calls srv_conn_guard_close before it closes a socket, under the same lock that this
 * loop holds while it shuts sockets down: an fd seen here is still the connection's, never a reused
 * number of a newer one. */
static void *guard_main(void *arg)
{
    srv_conn_guard *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += CHECK_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g->wake, &g->lock, &until);
        const long long now = now_ms();
        for (srv_conn_entry *e = g->head; e; e = e->next)
            if (e->waiting && !e->cut && now > e->deadline_ms) {
                shutdown(e->fd, SHUT_RDWR);
                e->cut = true;
                g->n_cut++;
            }
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

srv_conn_guard *srv_conn_guard_start(int head_ms, int idle_ms, woolly_error *err)
{
    srv_conn_guard *g = calloc(1, sizeof *g);
    if (!g) {
        woolly_fail(err, "out of memory");
        return NULL;
    }
    g->head_ms = head_ms;
    g->idle_ms = idle_ms;
    pthread_mutex_init(&g->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->wake, &ca);
    pthread_condattr_destroy(&ca);
    const int rc = pthread_create(&g->thread, NULL, guard_main, g);
    if (rc) {
        woolly_fail(err, "cannot start the connection guard's thread (error %d)", rc);
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->lock);
        free(g);
        return NULL;
    }
    return g;
}

void srv_conn_guard_stop(srv_conn_guard *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->stop = true;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    while (g->head) { /* none should be left; freed all the same */
        srv_conn_entry *e = g->head;
        g->head = e->next;
        free(e);
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

srv_conn_entry *srv_conn_guard_open(srv_conn_guard *g, int fd)
{
    srv_conn_entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->fd = fd;
    e->waiting = true;
    e->deadline_ms = now_ms() + g->head_ms;
    pthread_mutex_lock(&g->lock);
    e->next = g->head;
    if (g->head)
        g->head->prev = e;
    g->head = e;
    pthread_mutex_unlock(&g->lock);
    return e;
}

void srv_conn_guard_head_done(srv_conn_guard *g, srv_conn_entry *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&g->lock);
    e->waiting = false;
    pthread_mutex_unlock(&g->lock);
}

void srv_conn_guard_request_done(srv_conn_guard *g, srv_conn_entry *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&g->lock);
    e->waiting = true;
    e->deadline_ms = now_ms() + g->idle_ms + g->head_ms;
    pthread_mutex_unlock(&g->lock);
}

void srv_conn_guard_close(srv_conn_guard *g, srv_conn_entry *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&g->lock);
    if (e->prev)
        e->prev->next = e->next;
    else
        g->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    pthread_mutex_unlock(&g->lock);
    free(e);
}

unsigned long srv_conn_guard_cut(srv_conn_guard *g)
{
    pthread_mutex_lock(&g->lock);
    const unsigned long n = g->n_cut;
    pthread_mutex_unlock(&g->lock);
    return n;
}
