#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "context.h"
#include "slot.h"

/* A slot's share of a step's batch. */
typedef struct srv_member {
    srv_slot *slot;
    const woolly_token *ids;
    int32_t n, row0; /* row0: in its batch */
    bool prompt;
} srv_member;

struct srv_scheduler {
    srv_metrics *metrics;
    int n_slots;
    srv_slot *slots;
    int32_t n_ctx;
    woolly_context *ctx; /* one sequence per slot */
    woolly_batch batch;  /* the step's tokens, cap n_batch */
    srv_member *members; /* [n_slots] the step's slots */
    /* Speculative decoding: the generating slots' tokens and guesses take the decode path (plain
     * decoding's arithmetic, each token a run of its own: decode_seq marks their sequences), in the
     * batch beside the prompt chunks, which take the prompt path as without speculation. */
    bool speculate;
    srv_spec spec;
    bool *decode_seq;      /* [n_slots] */
    srv_spec_slot **draft; /* [n_slots] the step's slots that wait for the draft model's guesses, */
    srv_member **drafting; /* [n_slots] and their members */

    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t wake;  /* a job arrived, was cancelled, or stop */
    srv_job **queue;      /* ring of queue_cap */
    int queue_cap, queue_head, n_queued;
    bool *busy; /* [n_slots] */
    int n_busy;
    uint64_t clock; /* counts jobs admitted, for least-recently-used */
    bool stop;
    pthread_t engine;
    bool engine_started;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static srv_job *queue_at(srv_scheduler *s, int i)
{
    return s->queue[(s->queue_head + i) % s->queue_cap];
}

static srv_job *queue_pop(srv_scheduler *s)
{
    srv_job *j = s->queue[s->queue_head];
    s->queue_head = (s->queue_head + 1) % s->queue_cap;
    s->n_queued--;
    return j;
}

/* The free slot for a prompt. A slot whose cache is mostly a beginning of the prompt (a conversation
 * that goes on), or holds most of the prompt, is worth its cache: the one that reuses the most wins.
 * Otherwise (a shared BOS is no reason to evict a conversation) an empty slot, else the one used least
 * recently. */
static int pick_slot(srv_scheduler *s, const srv_job *j)
{
    int best = -1, spare = -1;
    int32_t best_reuse = 0;
    for (int i = 0; i < s->n_slots; i++) {
        if (s->busy[i])
            continue;
        const srv_slot *slot = &s->slots[i];
        const int32_t r = srv_slot_reusable(slot, j->prompt, j->n_prompt);
        const bool worth = r > 0 && (2 * r >= slot->n_cache || 2 * r >= j->n_prompt);
        if (worth && r > best_reuse) {
            best = i;
            best_reuse = r;
        }
        if (spare < 0 || (slot->n_cache == 0) > (s->slots[spare].n_cache == 0) ||
            ((slot->n_cache == 0) == (s->slots[spare].n_cache == 0) &&
             slot->last_used < s->slots[spare].last_used))
            spare = i;
    }
    return best >= 0 ? best : spare;
}

/* The slot other than `taker` (busy or free) whose cache holds the longest beginning of the prompt, if
 * longer than what taker holds itself: a beginning many requests share (a system prompt, a template)
 * is then copied instead of evaluated again. -1 if none. */
static int prefix_donor(const srv_scheduler *s, int taker, const srv_job *j, int32_t *n)
{
    int donor = -1;
    *n = srv_slot_reusable(&s->slots[taker], j->prompt, j->n_prompt);
    for (int i = 0; i < s->n_slots; i++) {
        const int32_t r = i == taker ? 0 : srv_slot_reusable(&s->slots[i], j->prompt, j->n_prompt);
        if (r > *n) {
            donor = i;
            *n = r;
        }
    }
    return donor;
}

/* The free slot a follower of a group takes: an empty one, else the one used least recently (its
 * prompt comes from the leader, so no cache is worth more than another). */
static int spare_slot(const srv_scheduler *s)
{
    int spare = -1;
    for (int i = 0; i < s->n_slots; i++) {
        const srv_slot *slot = &s->slots[i];
        if (s->busy[i])
            continue;
        if (spare < 0 || (slot->n_cache == 0) > (s->slots[spare].n_cache == 0) ||
            ((slot->n_cache == 0) == (s->slots[spare].n_cache == 0) &&
             slot->last_used < s->slots[spare].last_used))
            spare = i;
    }
    return spare;
}

/* The slots a queued job needs at once: one per choice of its group. */
static int slots_needed(const srv_job *j)
{
    return j->n_choices > 1 ? j->n_choices : 1;
}

/* Ends a job that never reached a slot, and the followers of its group. */
static void finish_unstarted(srv_scheduler *s, srv_job *j, srv_finish why, const char *error)
{
    if (why == SRV_FINISH_CANCELLED)
        srv_metrics_job(s->metrics, 0, 0, 0, 1);
    for (int i = 0; i + 1 < slots_needed(j); i++) {
        srv_job *f = j->followers[i];
        j->followers[i] = NULL;
        if (why == SRV_FINISH_ERROR && j->shutdown)
            srv_job_finish_shutdown(f);
        else
            srv_job_finish(f, why, error);
        srv_job_release(f);
    }
    srv_job_finish(j, why, error);
    srv_job_release(j);
}

/* Under lock: moves queued jobs into free slots. */
static void admit(srv_scheduler *s)
{
    while (s->n_queued > 0 && s->n_busy < s->n_slots) {
        srv_job *j = queue_at(s, 0);
        if (atomic_load(&j->cancel)) {
            queue_pop(s);
            finish_unstarted(s, j, SRV_FINISH_CANCELLED, NULL);
            continue;
        }
        if (s->n_slots - s->n_busy < slots_needed(j))
            break; /* a group waits for slots for all its choices; those behind it wait their turn */
        queue_pop(s);
        const int i = j->embed ? spare_slot(s) : pick_slot(s, j); /* an embedding evaluates all anyway */
        srv_slot *slot = &s->slots[i];
        s->busy[i] = true;
        s->n_busy++;
        slot->last_used = ++s->clock;
        int32_t n_shared;
        const int donor = j->embed ? -1 : prefix_donor(s, i, j, &n_shared);
        if (donor >= 0)
            srv_slot_adopt(slot, &s->slots[donor], n_shared); /* on failure the prompt is evaluated whole */
        srv_slot_attach(slot, j); /* a failure is reported through slot->finish */
        if (slots_needed(j) > 1)
            slot->hold_at = j->n_prompt - 1;
        for (int k = 0; k + 1 < slots_needed(j); k++) {
            srv_job *f = j->followers[k];
            j->followers[k] = NULL; /* the queue's reference passes to the slot */
            const int fi = spare_slot(s);
            srv_slot *fs = &s->slots[fi];
            s->busy[fi] = true;
            s->n_busy++;
            fs->last_used = ++s->clock;
            srv_slot_attach(fs, f);
            fs->follow = i;
        }
    }
}

/* Followers whose leader has evaluated all but the last token of the prompt copy its keys and values
 * (a leader that ended early leaves them to evaluate the prompt themselves). */
static void sync_followers(srv_scheduler *s)
{
    for (int k = 0; k < s->n_slots; k++) {
        srv_slot *f = &s->slots[k];
        if (!f->job || f->follow < 0)
            continue;
        const srv_slot *l = &s->slots[f->follow];
        const int32_t n = f->job->n_prompt - 1;
        if (l->job != f->job->leader || l->finish != SRV_FINISH_NONE) {
            f->follow = -1;
            continue;
        }
        if (l->n_cache < n)
            continue;
        srv_slot_follow(f, l, n); /* on failure the follower evaluates its prompt itself */
        f->follow = -1;
    }
}

/* Frees a slot whose job is over and hands the job its result. */
static void retire(srv_scheduler *s, srv_slot *slot)
{
    srv_job *j = slot->job;
    /* A group's prompt counts once: its followers' is the leader's. */
    srv_metrics_job(s->metrics, j->leader ? 0 : j->n_prompt, j->leader ? 0 : slot->n_reused, slot->n_gen,
                    slot->finish == SRV_FINISH_CANCELLED);
    if (s->speculate)
        srv_metrics_draft(s->metrics, slot->n_drafted, slot->n_accepted);
    pthread_mutex_lock(&s->lock);
    s->busy[slot->id] = false;
    s->n_busy--;
    pthread_mutex_unlock(&s->lock);
    srv_slot_detach(slot); /* after the slot is marked free: a client that has its answer sees it free */
}

/* Adds a member's tokens to the step's batch. Logits are kept for the token whose distribution the slot
 * samples from next: a generated token, or the last token of its prompt; for a token with guesses, for
 * each of them. */
static void join(srv_scheduler *s, srv_member *mb)
{
    woolly_batch *b = &s->batch;
    const srv_slot *slot = mb->slot;
    const bool last = !slot->job->embed && (!mb->prompt || slot->n_cache + mb->n == slot->n_fill);
    mb->row0 = b->n_tokens;
    for (int32_t i = 0; i < mb->n; i++)
        woolly_batch_add(b, mb->ids[i], slot->n_cache + i, slot->id, last && (i == mb->n - 1 || !mb->prompt));
}

/* Whether the slot already has tokens in this step's batch (a slot whose context shifted in the first
 * pass is in its prompt by the second). */
static bool joined(const srv_scheduler *s, int n_members, const srv_slot *slot)
{
    for (int i = 0; i < n_members; i++)
        if (s->members[i].slot == slot)
            return true;
    return false;
}

/* The draft model's guesses for the generating members that wait for them (the first n_gen members),
 * made together, and those members' tokens grown by them. */
static void draft(srv_scheduler *s, int n_gen)
{
    int n = 0;
    for (int i = 0; i < n_gen; i++)
        if (s->members[i].slot->spec && s->members[i].slot->ss.pending) {
            s->draft[n] = &s->members[i].slot->ss;
            s->drafting[n++] = &s->members[i];
        }
    if (n == 0)
        return;
    srv_metrics_draft_passes(s->metrics, srv_spec_draft(&s->spec, s->draft, n));
    for (int i = 0; i < n; i++)
        s->drafting[i]->n = srv_slot_drafted(s->drafting[i]->slot);
}

/* Evaluates the step's batch and tells its members; n_gen of its tokens are generated ones (with their
 * guesses), the rest prompts'. A speculating scheduler's generated tokens take the decode path, and a
 * batch of nothing else goes to the cost model, its time by its size. */
static void evaluate(srv_scheduler *s, int n_members, int32_t n_gen)
{
    woolly_batch *b = &s->batch;
    /* The final hidden states are kept only for steps that evaluate an embedding's tokens. */
    bool embed = false;
    for (int i = 0; i < n_members; i++)
        embed |= s->members[i].slot->job->embed;
    const int embed_rc = woolly_set_embeddings(s->ctx, embed);
    if (s->speculate) {
        for (int i = 0; i < s->n_slots; i++)
            s->decode_seq[i] = false;
        for (int i = 0; i < n_members; i++)
            s->decode_seq[s->members[i].slot->id] = !s->members[i].prompt;
        s->ctx->decode_seqs = s->decode_seq;
    }
    const double t0 = now_s();
    const int rc = woolly_decode(s->ctx, b);
    const double dt = now_s() - t0;
    s->ctx->decode_seqs = NULL;
    const int32_t n_prompt = b->n_tokens - n_gen;
    if (s->speculate && n_prompt == 0)
        spec_cost_observe(&s->spec.cost, b->n_tokens, dt);
    srv_metrics_step(s->metrics, n_gen);
    if (n_gen > 0)
        srv_metrics_engine(s->metrics, n_gen, dt * n_gen / b->n_tokens, 0);
    if (n_prompt > 0)
        srv_metrics_engine(s->metrics, n_prompt, dt * n_prompt / b->n_tokens, 1);
    for (int i = 0; i < n_members; i++) {
        const srv_member *mb = &s->members[i];
        const bool embedding = mb->slot->job->embed;
        const bool logits = !embedding && (!mb->prompt || mb->slot->n_cache + mb->n == mb->slot->n_fill);
        if (embedding && rc == 0 && embed_rc == 0)
            srv_slot_pool(mb->slot, mb->row0, mb->n);
        srv_slot_evaluated(mb->slot, mb->ids, mb->n, embedding && embed_rc ? embed_rc : rc,
                           logits ? mb->row0 + mb->n - 1 : -1);
    }
}

/* One step of every busy slot, as one batch (one forward pass): first each generating slot's next token
 * (with its guesses when speculating: the draft model makes every slot's at once), then prompt chunks
 * within the prompt budget (taken in the rotating order, so waiting prompts take turns). */
static void step(srv_scheduler *s, int start)
{
    woolly_batch *b = &s->batch;
    b->n_tokens = 0;
    int n_members = 0;
    int32_t n_gen = 0, n_gen_tokens = 0;
    sync_followers(s);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) { /* the generating slots' tokens: their guesses are complete now */
            if (s->speculate && s->spec.dctx)
                draft(s, n_members);
            for (int i = 0; i < n_members; i++) {
                join(s, &s->members[i]);
                n_gen_tokens += s->members[i].n;
            }
        }
        int32_t budget = pass == 0 ? 0 : n_gen > 0 ? SRV_PROMPT_CHUNK : b->cap;
        for (int k = 0; k < s->n_slots; k++) {
            srv_slot *slot = &s->slots[(start + k) % s->n_slots];
            if (!slot->job)
                continue;
            if (pass == 0 && atomic_load(&slot->job->cancel))
                srv_slot_cancel(slot);
            if (slot->follow >= 0 && slot->finish == SRV_FINISH_NONE)
                continue; /* waits for its leader's prompt */
            const bool prompt = srv_slot_in_prompt(slot);
            if (prompt != (pass == 1) || (pass == 1 && joined(s, n_members, slot)))
                continue;
            const int32_t room = b->cap - b->n_tokens;
            int32_t max_prompt = budget < room ? budget : room;
            if (prompt && slot->hold_at >= 0) {
                if (slot->n_cache < slot->hold_at)
                    max_prompt = max_prompt < slot->hold_at - slot->n_cache ? max_prompt
                                                                            : slot->hold_at - slot->n_cache;
                else
                    slot->hold_at = -1; /* its followers have copied the prompt (sync_followers) */
            }
            if (prompt && max_prompt < 1)
                continue; /* its turn comes in a later step */
            const woolly_token *ids;
            int32_t n;
            if (!srv_slot_plan(slot, max_prompt, &ids, &n)) {
                retire(s, slot);
                continue;
            }
            srv_member *mb = &s->members[n_members++];
            *mb = (srv_member){slot, ids, n, 0, prompt};
            if (prompt) {
                join(s, mb);
                budget -= n;
            } else {
                n_gen++; /* joins when every generating slot has planned (above) */
            }
        }
    }
    if (n_members > 0)
        evaluate(s, n_members, n_gen_tokens);
}

static void *engine_main(void *arg)
{
    srv_scheduler *s = arg;
    int start = 0; /* the slot that steps first in the next round: turns rotate */
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        admit(s);
        if (s->n_busy == 0) {
            pthread_cond_wait(&s->wake, &s->lock);
            continue;
        }
        pthread_mutex_unlock(&s->lock);
        /* Slots are attached and freed only by this thread, so the busy flags read here stay true. */
        step(s, start);
        start = (start + 1) % s->n_slots;
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

srv_scheduler *srv_scheduler_open(woolly_model *m, const srv_scheduler_config *cfg, srv_metrics *metrics,
                                  woolly_error *err)
{
    if (cfg->n_slots < 1 || cfg->queue_cap < 0) {
        woolly_fail(err, "the server needs at least one slot (got %d) and a queue of at least 0 (got %d)",
                    cfg->n_slots, cfg->queue_cap);
        return NULL;
    }
    srv_scheduler *s = calloc(1, sizeof *s);
    if (!s) {
        woolly_fail(err, "out of memory");
        return NULL;
    }
    s->metrics = metrics;
    s->queue_cap = cfg->queue_cap + cfg->n_slots; /* room for the jobs on their way to a free slot too */
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    s->slots = calloc((size_t)cfg->n_slots, sizeof *s->slots);
    s->busy = calloc((size_t)cfg->n_slots, sizeof *s->busy);
    s->queue = calloc((size_t)s->queue_cap, sizeof *s->queue);
    s->members = calloc((size_t)cfg->n_slots, sizeof *s->members);
    s->decode_seq = calloc((size_t)cfg->n_slots, sizeof *s->decode_seq);
    s->draft = calloc((size_t)cfg->n_slots, sizeof *s->draft);
    s->drafting = calloc((size_t)cfg->n_slots, sizeof *s->drafting);
    if (!s->slots || !s->busy || !s->queue || !s->members || !s->decode_seq || !s->draft || !s->drafting) {
        woolly_fail(err, "out of memory");
        srv_scheduler_close(s);
        return NULL;
    }
    woolly_context_params cp = cfg->ctx;
    cp.n_seq_max = cfg->n_slots;
    if (cp.n_batch < cfg->n_slots) /* 0 (the default) too: the context resolves it */
        cp.n_batch = cp.n_batch == 0 ? 0 : cfg->n_slots;
    s->speculate = cfg->draft || cfg->lookup > 0;
    const int32_t spec_batch = cfg->n_slots * (cfg->draft_max + 1); /* every slot's token and guesses */
    if (s->speculate) {
        cp.logits_all = true; /* a logits row for every token of the decode batch */
        if (cp.n_batch != 0 && cp.n_batch < spec_batch)
            cp.n_batch = spec_batch;
    }
    if (!(s->ctx = woolly_context_open(m, &cp))) {
        woolly_fail(err, "%s", woolly_last_error());
        srv_scheduler_close(s);
        return NULL;
    }
    if (s->speculate && woolly_context_n_batch(s->ctx) < spec_batch) {
        woolly_fail(err,
                    "speculative decoding: the batch size %d is below the %d slots' tokens and guesses "
                    "(%d x (draft-max %d + 1)): raise --batch-size or lower --draft-max",
                    woolly_context_n_batch(s->ctx), spec_batch, cfg->n_slots, cfg->draft_max);
        srv_scheduler_close(s);
        return NULL;
    }
    if (woolly_context_n_batch(s->ctx) < cfg->n_slots) {
        woolly_fail(err, "the batch size %d is below the %d slots (a context of %d positions is too small)",
                    woolly_context_n_batch(s->ctx), cfg->n_slots, woolly_context_n_ctx(s->ctx));
        srv_scheduler_close(s);
        return NULL;
    }
    /* Every slot's cache is committed now, after the cheap checks: a slot's first requests would
     * otherwise wait while the kernel zeroes its pages (a step of 64 prompt tokens for four new
     * llama-1b slots at -c 512 took 400-460 ms against 170-210 once warm), and a machine short of
     * memory fails here with a message instead of later. */
    if (woolly_kv_cache_populate(&s->ctx->kv, err)) {
        srv_scheduler_close(s);
        return NULL;
    }
    if (woolly_batch_init(&s->batch, woolly_context_n_batch(s->ctx))) {
        woolly_fail(err, "out of memory");
        srv_scheduler_close(s);
        return NULL;
    }
    if (s->speculate && srv_spec_open(&s->spec, m, cfg->draft, cfg->n_slots, woolly_context_n_ctx(s->ctx),
                                      cfg->draft_max, cfg->lookup, cp.n_threads, cp.kv_type, err)) {
        srv_scheduler_close(s);
        return NULL;
    }
    if (s->speculate && cfg->draft_fixed)
        srv_spec_fix_length(&s->spec);
    for (int i = 0; i < cfg->n_slots; i++) {
        if (srv_slot_open(&s->slots[i], i, m, s->ctx, err)) {
            srv_scheduler_close(s);
            return NULL;
        }
        s->n_slots++;
        if (s->speculate && srv_slot_speculate(&s->slots[i], &s->spec, err)) {
            srv_scheduler_close(s);
            return NULL;
        }
    }
    s->n_ctx = woolly_context_n_ctx(s->ctx);
    if (s->speculate)
        srv_metrics_draft(metrics, 0, 0); /* /metrics shows the draft counters from the start */
    const int rc = pthread_create(&s->engine, NULL, engine_main, s);
    if (rc) {
        woolly_fail(err, "cannot start the engine thread (error %d)", rc);
        srv_scheduler_close(s);
        return NULL;
    }
    s->engine_started = true;
    return s;
}

void srv_scheduler_shutdown(srv_scheduler *s)
{
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
    if (s->engine_started)
        pthread_join(s->engine, NULL);
    s->engine_started = false;
    /* The engine is gone: what it held is ours. Submissions are refused from now on (stop). */
    pthread_mutex_lock(&s->lock);
    while (s->n_queued > 0) {
        srv_job *j = queue_pop(s);
        srv_job_finish_shutdown(j);
        finish_unstarted(s, j, SRV_FINISH_ERROR, NULL); /* its followers too; the finish above stands */
    }
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < s->n_slots; i++) {
        srv_slot *slot = &s->slots[i];
        if (!slot->job)
            continue;
        srv_job_finish_shutdown(slot->job); /* first: the detach below keeps the finish it finds */
        slot->finish = SRV_FINISH_ERROR;
        snprintf(slot->error, sizeof slot->error, "the server is shutting down");
        retire(s, slot);
    }
}

void srv_scheduler_close(srv_scheduler *s)
{
    if (!s)
        return;
    srv_scheduler_shutdown(s);
    for (int i = 0; i < s->n_slots; i++)
        srv_slot_close(&s->slots[i]);
    woolly_context_close(s->ctx);
    woolly_batch_free(&s->batch);
    srv_spec_close(&s->spec);
    free(s->members);
    free(s->decode_seq);
    free(s->draft);
    free(s->drafting);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s->slots);
    free(s->busy);
    free(s->queue);
    free(s);
}

int srv_scheduler_submit(srv_scheduler *s, srv_job *j)
{
    return srv_scheduler_submit_group(s, &j, 1);
}

int srv_scheduler_submit_group(srv_scheduler *s, srv_job *const *jobs, int n)
{
    pthread_mutex_lock(&s->lock);
    const bool room = !s->stop && n <= s->n_slots && s->n_busy + s->n_queued < s->queue_cap;
    if (room) {
        srv_job *j = jobs[0];
        s->queue[(s->queue_head + s->n_queued) % s->queue_cap] = srv_job_ref(j);
        j->n_choices = n;
        for (int i = 1; i < n; i++)
            j->followers[i - 1] = srv_job_ref(jobs[i]);
        s->n_queued++;
        pthread_cond_signal(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
    return room ? 0 : -1;
}

void srv_scheduler_cancel(srv_scheduler *s, srv_job *j)
{
    atomic_store(&j->cancel, true);
    srv_job *dropped = NULL;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->n_queued; i++) {
        if (queue_at(s, i) != j)
            continue;
        for (int k = i; k + 1 < s->n_queued; k++) /* close the gap, keeping the order */
            s->queue[(s->queue_head + k) % s->queue_cap] = queue_at(s, k + 1);
        s->n_queued--;
        dropped = j;
        break;
    }
    pthread_mutex_unlock(&s->lock);
    if (dropped)
        finish_unstarted(s, dropped, SRV_FINISH_CANCELLED, NULL);
}

srv_scheduler_status srv_scheduler_state(srv_scheduler *s)
{
    pthread_mutex_lock(&s->lock);
    const srv_scheduler_status st = {s->n_slots, s->n_busy, s->n_queued};
    pthread_mutex_unlock(&s->lock);
    return st;
}

int32_t srv_scheduler_n_ctx(const srv_scheduler *s)
{
    return s->n_ctx;
}
