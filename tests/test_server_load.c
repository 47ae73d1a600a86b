/* The bounded load test of `woolly serve`: 16 clients send 20 requests each, in 5 rounds of 4, a random
 * mix of valid requests (half of them streamed, some cut off mid-stream by their client) and invalid ones
 * (malformed JSON, wrong types, huge numbers, invalid UTF-8, oversized bodies, unknown model, prompts
 * longer than the context). Every valid request must come back with exactly the text it gets alone
 * (greedy on stories260K: woolly run's text), every invalid one with its 4xx; afterwards the server is up,
 * every slot is free, its memory did not grow between round 2 and round 5 (release build), and it exits
 * cleanly with no leak (LeakSanitizer, in the sanitizer build). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server_harness.h"
#include "testutil.h"

enum { CLIENTS = 16, ROUNDS = 5, PER_ROUND = 4, N_CTX = 256, MAX_BODY = 65536 };

static const char *const PROMPTS[] = {"Once upon a time", "The little dog", "Lily and Ben", "One day"};
static const int LENGTHS[] = {4, 8, 12};
#define N_PROMPTS 4
#define N_LENGTHS 3

/* What each valid request must return: woolly run's greedy text, and the chat replies as they came
 * when run alone. */
static char *want_completion[N_PROMPTS][N_LENGTHS];
static char *want_chat[N_PROMPTS][N_LENGTHS];

enum kind {
    VALID,         /* completion or chat, streamed or not */
    CUT,           /* a streamed request whose client leaves after a few events */
    BAD_JSON,      /* 400 */
    BAD_TYPE,      /* 400 */
    HUGE_NUMBER,   /* 400 */
    BAD_UTF8,      /* 400 */
    TOO_LARGE,     /* 413 */
    UNKNOWN_MODEL, /* 404 */
    TOO_LONG,      /* 400: more tokens than the context */
    N_KINDS
};
static const long STATUS[N_KINDS] = {200, 0, 400, 400, 400, 400, 413, 404, 400};
static const char *const KIND_NAMES[N_KINDS] = {"valid",      "cut",           "malformed JSON",
                                                "wrong type", "huge number",   "invalid UTF-8",
                                                "oversized",  "unknown model", "too long"};

typedef struct client {
    int id;
    const th_server *s;
    pthread_barrier_t *round_done, *go_on;
    uint64_t rng;
    int sent[N_KINDS], ok[N_KINDS];
    int streamed, wrong_text;
    char failure[512]; /* the first thing that went wrong, for the report */
} client;

static uint32_t next_rand(client *c)
{
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return (uint32_t)(c->rng >> 11);
}

static void note(client *c, const char *fmt, const char *a, long b)
{
    if (!c->failure[0])
        snprintf(c->failure, sizeof c->failure, fmt, a, b);
}

/* The text of a 200 response, or NULL if it is not one well-formed (the harness asserts only in the main
 * thread, so this checks by itself). */
static char *text_of(const th_resp *r, bool stream)
{
    if (r->status != 200)
        return NULL;
    if (!stream) {
        json_t *b = json_loadb(r->body, r->len, 0, NULL);
        json_t *c = json_array_get(json_object_get(b, "choices"), 0);
        json_t *m = json_object_get(c, "message");
        json_t *t = m ? json_object_get(m, "content") : json_object_get(c, "text");
        char *s = json_is_string(t) ? strdup(json_string_value(t)) : NULL;
        json_decref(b);
        return s;
    }
    size_t cap = 256, len = 0;
    char *out = malloc(cap);
    out[0] = 0;
    bool done = false;
    for (const char *p = r->body; *p;) {
        const char *end = strstr(p, "\n\n");
        if (end && *p == ':') { /* a comment (keep-alive) */
            p = end + 2;
            continue;
        }
        if (!end || strncmp(p, "data: ", 6) || done) {
            free(out);
            return NULL;
        }
        p += 6;
        if (end - p == 6 && !strncmp(p, "[DONE]", 6)) {
            done = true;
        } else {
            json_t *ev = json_loadb(p, (size_t)(end - p), 0, NULL);
            json_t *c = json_array_get(json_object_get(ev, "choices"), 0);
            json_t *d = json_object_get(c, "delta");
            json_t *t = d ? json_object_get(d, "content") : json_object_get(c, "text");
            if (!ev) {
                free(out);
                return NULL;
            }
            if (json_is_string(t)) {
                const size_t n = json_string_length(t);
                if (len + n + 1 > cap) {
                    cap = 2 * (len + n + 1);
                    out = realloc(out, cap);
                }
                memcpy(out + len, json_string_value(t), n + 1);
                len += n;
            }
            json_decref(ev);
        }
        p = end + 2;
    }
    if (!done) {
        free(out);
        return NULL;
    }
    return out;
}

static char *valid_body(int prompt, int length, bool chat, bool stream)
{
    if (chat)
        return th_fmt("{\"model\":\"stories260K\",\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],"
                      "\"max_tokens\":%d,\"temperature\":0%s}",
                      PROMPTS[prompt], LENGTHS[length], stream ? ",\"stream\":true" : "");
    return th_fmt("{\"model\":\"stories260K\",\"prompt\":\"%s\",\"max_tokens\":%d,\"temperature\":0%s}",
                  PROMPTS[prompt], LENGTHS[length], stream ? ",\"stream\":true" : "");
}

static char *invalid_body(client *c, enum kind k, size_t *len)
{
    char *b = NULL;
    switch (k) {
    case BAD_JSON: {
        char *v = valid_body((int)(next_rand(c) % N_PROMPTS), 0, next_rand(c) % 2, false);
        v[1 + next_rand(c) % (strlen(v) - 2)] = 0; /* cut short: never a whole object */
        b = v;
        break;
    }
    case BAD_TYPE: {
        static const char *const T[] = {"{\"prompt\":\"a\",\"max_tokens\":\"eight\"}",
                                        "{\"prompt\":5}",
                                        "{\"messages\":{}}",
                                        "{\"prompt\":\"a\",\"stream\":1}",
                                        "{\"prompt\":\"a\",\"stop\":[1]}",
                                        "{\"prompt\":\"a\",\"seed\":\"x\"}"};
        b = strdup(T[next_rand(c) % 6]);
        break;
    }
    case HUGE_NUMBER: {
        static const char *const T[] = {"{\"prompt\":\"a\",\"max_tokens\":1e30}",
                                        "{\"prompt\":\"a\",\"max_tokens\":99999999999999999999999999}",
                                        "{\"prompt\":\"a\",\"temperature\":1e308}",
                                        "{\"prompt\":\"a\",\"top_k\":-99999999999}",
                                        "{\"prompt\":[1,2,2147483648]}"};
        b = strdup(T[next_rand(c) % 5]);
        break;
    }
    case BAD_UTF8: {
        static const char *const T[] = {"{\"prompt\":\"a\xff b\"}", "{\"prompt\":\"\xc3\x28\"}",
                                        "{\"prompt\":\"\xed\xa0\x80\"}",
                                        "{\"prompt\":\"\xf8\x88\x80\x80\x80\"}"};
        b = strdup(T[next_rand(c) % 4]);
        break;
    }
    case TOO_LARGE: {
        const size_t n = MAX_BODY + 1 + next_rand(c) % (3 * MAX_BODY);
        b = malloc(n + 1);
        memset(b, ' ', n);
        memcpy(b, "{\"prompt\":\"", 11);
        b[n - 2] = '"';
        b[n - 1] = '}';
        b[n] = 0;
        break;
    }
    case UNKNOWN_MODEL:
        b = strdup("{\"model\":\"gpt-4o\",\"prompt\":\"a\"}");
        break;
    case TOO_LONG: {
        const size_t words = N_CTX + 40;
        b = malloc(32 + 5 * words);
        strcpy(b, "{\"prompt\":\"");
        for (size_t i = 0; i < words; i++)
            strcat(b, "dog ");
        strcat(b, "\"}");
        break;
    }
    default:
        break;
    }
    *len = strlen(b);
    return b;
}

static void one_request(client *c)
{
    /* About 60% valid (half of them streamed), 8% cut off, the rest spread over the invalid kinds. */
    const uint32_t roll = next_rand(c) % 100;
    enum kind k = roll < 60   ? VALID
                  : roll < 68 ? CUT
                              : (enum kind)(BAD_JSON + (roll - 68) % (N_KINDS - BAD_JSON));
    c->sent[k]++;
    const int prompt = (int)(next_rand(c) % N_PROMPTS), length = (int)(next_rand(c) % N_LENGTHS);
    const bool chat = next_rand(c) % 4 == 0;
    const char *path = chat ? "/v1/chat/completions" : "/v1/completions";
    if (k == CUT) { /* long, so that the client leaves before the end */
        char *body = chat
                         ? th_fmt("{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],\"max_tokens\":64,"
                                  "\"ignore_eos\":true,\"stream\":true}",
                                  PROMPTS[prompt])
                         : th_fmt("{\"prompt\":\"%s\",\"max_tokens\":64,\"ignore_eos\":true,\"stream\":true}",
                                  PROMPTS[prompt]);
        const int got = th_stream_abort(c->s, path, body, 2 + (int)(next_rand(c) % 4));
        if (got >= 2)
            c->ok[k]++;
        else
            note(c, "a stream to be cut sent %s%ld events", "", got);
        free(body);
        return;
    }
    if (k == VALID) {
        const bool stream = next_rand(c) % 2;
        c->streamed += stream;
        char *body = valid_body(prompt, length, chat, stream);
        th_resp r = th_post(c->s, path, body);
        char *text = text_of(&r, stream);
        const char *want = chat ? want_chat[prompt][length] : want_completion[prompt][length];
        if (text && !strcmp(text, want)) {
            c->ok[k]++;
        } else {
            c->wrong_text++;
            note(c, "a valid request got '%s' (status %ld)", text ? text : r.body, r.status);
        }
        free(text);
        free(body);
        th_resp_free(&r);
        return;
    }
    size_t len;
    char *body = invalid_body(c, k, &len);
    th_resp r =
        th_request(c->s, "POST", chat && k != BAD_TYPE ? path : "/v1/completions", body, len, NULL, 0);
    json_t *root = json_loadb(r.body, r.len, 0, NULL);
    if (r.status == STATUS[k] && json_is_string(json_object_get(json_object_get(root, "error"), "message")))
        c->ok[k]++;
    else
        note(c, "a %s request got status %ld", KIND_NAMES[k], r.status);
    json_decref(root);
    free(body);
    th_resp_free(&r);
}

static void *client_main(void *arg)
{
    client *c = arg;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < PER_ROUND; i++)
            one_request(c);
        pthread_barrier_wait(c->round_done); /* the main thread looks at the server between rounds */
        pthread_barrier_wait(c->go_on);
    }
    return NULL;
}

static void expected_texts(const th_server *s, const char *model)
{
    for (int p = 0; p < N_PROMPTS; p++)
        for (int l = 0; l < N_LENGTHS; l++) {
            want_completion[p][l] = th_woolly_run(model, PROMPTS[p], LENGTHS[l], NULL);
            char *body = valid_body(p, l, true, false);
            th_resp r = th_post(s, "/v1/chat/completions", body);
            cr_assert_eq(r.status, 200, "%s", r.body);
            want_chat[p][l] = text_of(&r, false);
            cr_assert(want_chat[p][l] != NULL);
            th_resp_free(&r);
            free(body);
        }
}

Test(server_load, sixteen_clients_twenty_requests_each)
{
    char *model = strdup(tu_data("models/stories260K.gguf"));
    th_server s;
    th_start(&s, NULL, "-m %s -c %d --parallel 4 --queue 64 --max-body %d --max-tokens 64", model, N_CTX,
             MAX_BODY);
    expected_texts(&s, model);

    pthread_barrier_t round_done, go_on;
    pthread_barrier_init(&round_done, NULL, CLIENTS + 1);
    pthread_barrier_init(&go_on, NULL, CLIENTS + 1);
    static client clients[CLIENTS];
    pthread_t threads[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        clients[i] = (client){.id = i,
                              .s = &s,
                              .round_done = &round_done,
                              .go_on = &go_on,
                              .rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1)};
        cr_assert(pthread_create(&threads[i], NULL, client_main, &clients[i]) == 0);
    }
    long rss[ROUNDS] = {0};
    bool idle[ROUNDS] = {0};
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_wait(&round_done);
        idle[round] = th_wait_idle(&s, 10000); /* cancelled streams end at their slot's next step */
        rss[round] = th_rss_kib(&s);
        pthread_barrier_wait(&go_on);
    }
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&round_done);
    pthread_barrier_destroy(&go_on);

    int sent[N_KINDS] = {0}, ok[N_KINDS] = {0}, streamed = 0, wrong = 0;
    for (int i = 0; i < CLIENTS; i++) {
        for (int k = 0; k < N_KINDS; k++) {
            sent[k] += clients[i].sent[k];
            ok[k] += clients[i].ok[k];
        }
        streamed += clients[i].streamed;
        wrong += clients[i].wrong_text;
        cr_expect(!clients[i].failure[0], "client %d: %s", i, clients[i].failure);
    }
    int total = 0;
    fprintf(stderr, "load test: %d clients x %d requests:", CLIENTS, ROUNDS * PER_ROUND);
    for (int k = 0; k < N_KINDS; k++) {
        total += sent[k];
        fprintf(stderr, " %s %d/%d,", KIND_NAMES[k], ok[k], sent[k]);
        cr_expect_eq(ok[k], sent[k], "%s: %d of %d as expected", KIND_NAMES[k], ok[k], sent[k]);
        cr_expect_gt(sent[k], 0, "no %s request was sent", KIND_NAMES[k]);
    }
    fprintf(stderr, " %d of the valid ones streamed; RSS after round 2 %ld KiB, after round 5 %ld KiB\n",
            streamed, rss[1], rss[4]);
    cr_expect_eq(total, CLIENTS * ROUNDS * PER_ROUND);
    cr_expect_eq(wrong, 0);
    cr_expect(streamed * 3 >= sent[VALID] && streamed * 3 <= 2 * sent[VALID],
              "%d of %d valid requests streamed", streamed, sent[VALID]);
    for (int round = 0; round < ROUNDS; round++)
        cr_expect(idle[round], "a slot was still busy 10 s after round %d", round + 1);

    /* Still up, every slot free, the numbers add up. */
    th_resp r = th_get(&s, "/health");
    cr_expect_eq(r.status, 200);
    th_resp_free(&r);
    cr_expect_eq(th_metric(&s, "woolly_slots_busy"), 0);
    cr_expect_eq(th_metric(&s, "woolly_queue_depth"), 0);
    /* A cut stream may have finished before its client left; the rest were cancelled. */
    const double cancelled = th_metric(&s, "woolly_requests_cancelled_total");
    cr_expect(cancelled >= 0 && cancelled <= sent[CUT], "%g cancelled, %d cut", cancelled, sent[CUT]);
    fprintf(stderr, "load test: %g of the %d cut streams were cancelled before their end\n", cancelled,
            sent[CUT]);
#if !defined(__SANITIZE_ADDRESS__)
    /* The sanitizer's allocator keeps freed memory in quarantine: RSS means something only without it. */
    cr_expect(labs(rss[4] - rss[1]) <= 2048, "RSS went from %ld KiB after round 2 to %ld KiB after round 5",
              rss[1], rss[4]);
#endif
    char *err = NULL;
    const int status = th_stop(&s, &err);
    cr_expect_eq(status, 0, "woolly serve exited with %d: %s", status, err);
    cr_expect(!strstr(err, "LeakSanitizer") && !strstr(err, "AddressSanitizer") &&
                  !strstr(err, "runtime error"),
              "the sanitizers reported: %s", err);
    free(err);
    for (int p = 0; p < N_PROMPTS; p++)
        for (int l = 0; l < N_LENGTHS; l++) {
            free(want_completion[p][l]);
            free(want_chat[p][l]);
        }
    free(model);
}
