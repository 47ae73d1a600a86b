/* libFuzzer target for what the server reads from its clients and from the model's output before any
 * forward pass (runtime/server): a generation request's JSON body, checked field by field, its messages
 * rendered through a chat format (each built-in family, and the model templates of tests/data/chat) with
 * its tools compiled to a grammar; the model's output parsed back into tool calls; and a stream of text
 * cut at stop strings. An input's first byte chooses the part and the format; the rest is the body, the
 * output or the stop strings and the text.
 *
 * Checked beyond "no crash, no leak, no hang": a refused request says why with a status the API knows, an
 * accepted one is within the server's limits; parsed tool calls have a name and JSON arguments, and the
 * content before them lies within the text; the stop-string stream gives out a prefix of its text that ends
 * exactly at a stop string, or all of it when none appears, whatever the chunks it arrives in. */
#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "grammar.h"
#include "request.h"
#include "stop.h"
#include "tool_calls.h"

#define STR2(x) #x
#define STR(x) STR2(x)

/* The public grammar calls as the library makes them (model/sampler_grammar.c, model/api.c), without
 * the model those files bring with them. */
static _Thread_local woolly_error last_error;
const char *woolly_last_error(void)
{
    return last_error.msg;
}
woolly_grammar *woolly_grammar_open_gbnf(const char *text, size_t len)
{
    return woolly_grammar_from_gbnf(text, len, &last_error);
}
woolly_grammar *woolly_grammar_open_json_schema(const char *json, size_t len)
{
    return woolly_grammar_from_json_schema(json, len, &last_error);
}
void woolly_grammar_close(woolly_grammar *g)
{
    woolly_grammar_free(g);
}

enum { MAX_TEMPLATES = 32, N_VOCAB = 512, MAX_TOKENS = 256, N_CTX = 2048 };

static woolly_chat_format templates[MAX_TEMPLATES];
static int n_templates;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_request: invariant violated: %s\n", what);
        abort();
    }
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *s = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        const long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (s = malloc((size_t)n + 1))) {
            s[fread(s, 1, (size_t)n, f)] = 0;
        }
    }
    fclose(f);
    return s;
}

/* The model templates the tests render, opened once: a chat request's messages go through them as
 * through a served model's. Missing files are a fault of the build, not of an input. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = STR(WOOLLY_CHAT_TEMPLATE_DIR);
    DIR *d = opendir(dir);
    check(d != NULL, "the chat template folder (tests/data/chat) opens");
    struct dirent *e;
    while ((e = readdir(d)) && n_templates < MAX_TEMPLATES) {
        const size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 6, ".jinja"))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *text = read_text(path);
        check(text != NULL, "a chat template reads");
        if (woolly_chat_format_open(&templates[n_templates], text, "<s>", "</s>", -1, "fuzz_request") == 0)
            n_templates++;
        else
            woolly_chat_format_close(&templates[n_templates]);
        free(text);
    }
    closedir(d);
    check(n_templates > 0, "some chat template opens");
    return 0;
}

static const woolly_chat_format *format_of(unsigned pick)
{
    const unsigned n_builtin = WOOLLY_CHAT_UNKNOWN;
    pick %= n_builtin + (unsigned)n_templates;
    return pick < n_builtin ? woolly_chat_builtin((enum woolly_chat_family)pick)
                            : &templates[pick - n_builtin];
}

static void fuzz_request(const char *body, size_t len, enum srv_gen_kind kind, unsigned pick)
{
    const woolly_sampler_params defaults = {.temp = 0.8f,
                                            .top_k = 40,
                                            .top_p = 0.95f,
                                            .min_p = 0.05f,
                                            .repeat_penalty = 1.0f,
                                            .repeat_last_n = 64};
    const srv_gen_rules rules = {.model_id = "woolly",
                                 .defaults = defaults,
                                 .n_vocab = N_VOCAB,
                                 .max_tokens_limit = MAX_TOKENS,
                                 .json_room = (size_t)64 * N_CTX,
                                 .chat = format_of(pick)};
    srv_gen_request r;
    srv_error err = {0};
    if (srv_gen_request_parse(body, len, kind, &rules, &r, &err) == 0) {
        check(r.kind == kind, "the request is of the kind asked");
        check(r.prompt != NULL || r.ids != NULL, "an accepted request has a prompt");
        for (int32_t i = 0; i < r.n_ids; i++)
            check(r.ids[i] >= 0 && r.ids[i] < N_VOCAB, "a prompt's token ids are in the vocabulary");
        check(r.max_tokens >= 0 && r.max_tokens <= MAX_TOKENS, "max_tokens is within the server's limit");
        check(r.n_stop >= 0 && r.n_stop <= SRV_MAX_STOP, "at most SRV_MAX_STOP stop strings");
        for (int i = 0; i < r.n_stop; i++)
            check(r.stop[i] && strlen(r.stop[i]) <= SRV_MAX_STOP_BYTES, "a stop string is within its bound");
        check(r.n >= 1, "at least one choice");
    } else {
        check(err.status == 400 || err.status == 404 || err.status == 413 || err.status == 500,
              "a refusal has a status the API knows");
        check(err.message[0] != 0, "a refusal says why");
    }
    srv_gen_request_free(&r);
}

static void fuzz_tool_output(const char *text, size_t len, unsigned pick)
{
    const enum woolly_chat_tool_syntax syntax = (enum woolly_chat_tool_syntax)(pick % 4);
    const bool parallel = (pick >> 2) & 1;
    size_t content_end = (size_t)-1;
    json_t *calls = srv_tool_calls_parse(syntax, text, len, parallel, &content_end);
    if (calls) {
        check(content_end <= len, "the content before the calls lies within the output");
        check(json_is_array(calls) && json_array_size(calls) >= 1, "parsed calls are a non-empty array");
        check(parallel || json_array_size(calls) == 1, "without parallel_tool_calls, one call");
        size_t i;
        json_t *c;
        json_array_foreach(calls, i, c)
        {
            const json_t *fn = json_object_get(c, "function");
            const char *name = json_string_value(json_object_get(fn, "name"));
            const char *args = json_string_value(json_object_get(fn, "arguments"));
            check(name != NULL && args != NULL, "a call has a name and arguments");
            json_t *parsed = json_loads(args, JSON_DECODE_ANY, NULL);
            check(parsed != NULL, "a call's arguments are a JSON text");
            json_decref(parsed);
        }
        json_decref(calls);
    }
    check(srv_tool_calls_content_prefix(syntax, text, len) <= len,
          "a streamed prefix lies within the output");
}

/* Up to SRV_MAX_STOP stop strings on the first line, separated by tabs; the text after it arrives in
 * chunks whose sizes the pick cycles through. */
static void fuzz_stop(const char *data, size_t size, unsigned pick)
{
    const char *nl = memchr(data, '\n', size);
    if (!nl)
        return;
    char *words[SRV_MAX_STOP];
    int n = 0;
    for (const char *w = data; w <= nl && n < SRV_MAX_STOP;) {
        const char *end = memchr(w, '\t', (size_t)(nl - w));
        end = end ? end : nl;
        /* as the request parser passes them on: not empty, not past the bound, no NUL */
        if (end > w && (size_t)(end - w) <= SRV_MAX_STOP_BYTES && !memchr(w, 0, (size_t)(end - w))) {
            words[n] = strndup(w, (size_t)(end - w));
            check(words[n] != NULL, "out of memory");
            n++;
        }
        w = end + 1;
    }
    const char *text = nl + 1;
    const size_t len = size - (size_t)(text - data);
    srv_stop s;
    srv_stop_init(&s, words, n);
    srv_buf out = {0};
    int stopped = 0;
    for (size_t at = 0, k = 0; at < len && !stopped; k++) {
        size_t chunk = 1 + ((pick >> (k % 6)) & 7);
        chunk = chunk < len - at ? chunk : len - at;
        stopped = srv_stop_feed(&s, text + at, chunk, &out);
        check(stopped >= 0, "out of memory");
        at += chunk;
    }
    if (!stopped)
        check(srv_stop_flush(&s, &out) == 0, "out of memory");
    check(out.len <= len && (out.len == 0 || memcmp(out.p, text, out.len) == 0),
          "what goes out is the text's prefix");
    int at_stop = 0;
    for (int i = 0; i < n; i++) {
        const size_t wl = strlen(words[i]);
        at_stop |= out.len + wl <= len && memcmp(text + out.len, words[i], wl) == 0;
        /* no stop string lies wholly inside what went out */
        check(!memmem(out.p ? out.p : "", out.len, words[i], wl), "a stop string went out");
    }
    if (stopped)
        check(at_stop, "the text stops at a stop string");
    else
        check(out.len == len, "without a stop string, all of the text goes out");
    srv_buf_free(&out);
    srv_stop_free(&s);
    for (int i = 0; i < n; i++)
        free(words[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const unsigned pick = data[0] >> 2;
    const char *rest = (const char *)data + 1;
    const size_t n = size - 1;
    switch (data[0] & 3) {
    case 0:
        fuzz_request(rest, n, SRV_GEN_CHAT, pick);
        break;
    case 1:
        fuzz_request(rest, n, SRV_GEN_COMPLETION, pick);
        break;
    case 2:
        fuzz_tool_output(rest, n, pick);
        break;
    default:
        fuzz_stop(rest, n, pick);
        break;
    }
    return 0;
}
