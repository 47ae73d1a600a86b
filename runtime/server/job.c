#include "job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

srv_job *srv_job_new(woolly_token *prompt, int32_t n)
{
    srv_job *j = calloc(1, sizeof *j);
    if (!j) {
        free(prompt);
        return NULL;
    }
    j->prompt = prompt;
    j->n_prompt = n;
    atomic_init(&j->cancel, false);
    pthread_mutex_init(&j->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->changed, &ca);
    pthread_condattr_destroy(&ca);
    j->refs = 1;
    return j;
}

srv_job *srv_job_ref(srv_job *j)
{
    pthread_mutex_lock(&j->lock);
    j->refs++;
    pthread_mutex_unlock(&j->lock);
    return j;
}

void srv_job_release(srv_job *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&j->lock);
    const int left = --j->refs;
    pthread_mutex_unlock(&j->lock);
    if (left > 0)
        return;
    pthread_cond_destroy(&j->changed);
    pthread_mutex_destroy(&j->lock);
    if (!j->leader) /* a follower borrows its leader's, which its reference keeps alive */
        woolly_grammar_close(j->grammar);
    srv_job_release(j->leader);
    for (int i = 0; i < j->n_stop; i++)
        free(j->stop[i]);
    free(j->prompt);
    free(j->piece_end);
    free(j->lp);
    free(j->embd_sum);
    free(j->embd);
    srv_buf_free(&j->text);
    free(j);
}

srv_job *srv_job_lead(srv_job *j)
{
    return j->leader ? j->leader : j;
}

/* After a change of j (its lock released): the group's waiter hears of it through the leader. */
static void notify_group(srv_job *j)
{
    srv_job *l = srv_job_lead(j);
    pthread_mutex_lock(&l->lock);
    l->events++;
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->lock);
}

int srv_job_emit(srv_job *j, const char *text, size_t n)
{
    int rc = -1;
    pthread_mutex_lock(&j->lock);
    if (j->n_pieces == j->cap_pieces) {
        const int32_t cap = j->cap_pieces ? 2 * j->cap_pieces : 64;
        size_t *p = realloc(j->piece_end, sizeof *p * (size_t)cap);
        if (!p)
            goto done;
        j->piece_end = p;
        j->cap_pieces = cap;
    }
    if (srv_buf_append(&j->text, text, n))
        goto done;
    j->piece_end[j->n_pieces++] = j->text.len;
    pthread_cond_broadcast(&j->changed);
    rc = 0;
done:
    pthread_mutex_unlock(&j->lock);
    if (rc == 0)
        notify_group(j);
    return rc;
}

int srv_job_logprob(srv_job *j, const srv_token_lp *lp)
{
    int rc = 0;
    pthread_mutex_lock(&j->lock);
    if (j->n_lp == j->cap_lp) {
        const int32_t cap = j->cap_lp ? 2 * j->cap_lp : 16;
        srv_token_lp *p = realloc(j->lp, sizeof *p * (size_t)cap);
        if (p) {
            j->lp = p;
            j->cap_lp = cap;
        }
    }
    if (j->n_lp < j->cap_lp)
        j->lp[j->n_lp++] = *lp;
    else
        rc = -1;
    pthread_mutex_unlock(&j->lock);
    return rc;
}

void srv_job_progress(srv_job *j, int32_t n_cached, int32_t n_generated)
{
    pthread_mutex_lock(&j->lock);
    j->n_cached = n_cached;
    j->n_generated = n_generated;
    pthread_mutex_unlock(&j->lock);
}

void srv_job_finish(srv_job *j, srv_finish why, const char *error)
{
    pthread_mutex_lock(&j->lock);
    if (j->finish == SRV_FINISH_NONE) {
        j->finish = why;
        if (error)
            snprintf(j->error, sizeof j->error, "%s", error);
    }
    pthread_cond_broadcast(&j->changed);
    pthread_mutex_unlock(&j->lock);
    notify_group(j);
}

void srv_job_finish_shutdown(srv_job *j)
{
    pthread_mutex_lock(&j->lock);
    if (j->finish == SRV_FINISH_NONE)
        j->shutdown = true;
    pthread_mutex_unlock(&j->lock);
    srv_job_finish(j, SRV_FINISH_ERROR, "the server is shutting down: the request was not completed");
}

bool srv_job_wait_locked(srv_job *j, int32_t seen, int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (j->n_pieces <= seen && j->finish == SRV_FINISH_NONE)
        if (pthread_cond_timedwait(&j->changed, &j->lock, &until) == ETIMEDOUT)
            break;
    return j->n_pieces > seen || j->finish != SRV_FINISH_NONE;
}

static struct timespec deadline(int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    return until;
}

bool srv_job_group_wait_locked(srv_job *leader, uint64_t seen, int timeout_ms)
{
    const struct timespec until = deadline(timeout_ms);
    while (leader->events == seen)
        if (pthread_cond_timedwait(&leader->changed, &leader->lock, &until) == ETIMEDOUT)
            break;
    return leader->events != seen;
}

const char *srv_finish_name(srv_finish f)
{
    switch (f) {
    case SRV_FINISH_STOP:
        return "stop";
    case SRV_FINISH_LENGTH:
        return "length";
    default:
        return NULL;
    }
}
