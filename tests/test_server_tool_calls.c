/* Tool calls on their own (runtime/server/tool_calls.c): each family's call syntax parsed back from fixed
 * strings (with and without its marker, with content before, several calls, the first only without
 * parallel calls, and text that is not a call), the streaming hold-back, the grammar of a required call
 * (one, or several with parallel_tool_calls) against strings it must accept and refuse, and the request
 * checks that answer 400 naming the field. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "grammar.h"
#include "job.h"
#include "request.h"
#include "testutil.h"
#include "tool_calls.h"

/* calls[k].function.name and .arguments (as parsed JSON, compared with want_args). */
static void expect_call(enum woolly_chat_tool_syntax syntax, const json_t *calls, size_t k, const char *name,
                        const char *want_args)
{
    const json_t *c = json_array_get(calls, k);
    cr_assert(json_is_object(c), "no call %zu", k);
    const char *id = json_string_value(json_object_get(c, "id"));
    cr_assert(id != NULL);
    if (syntax == WOOLLY_TOOLS_MISTRAL) /* what Mistral's templates accept back */
        cr_expect(strlen(id) == 9 &&
                      strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") == 9,
                  "id %s", id);
    else
        cr_expect(!strncmp(id, "call_", 5), "id %s", id);
    cr_expect_str_eq(json_string_value(json_object_get(c, "type")), "function");
    const json_t *f = json_object_get(c, "function");
    cr_expect_str_eq(json_string_value(json_object_get(f, "name")), name);
    const char *args = json_string_value(json_object_get(f, "arguments"));
    cr_assert(args != NULL);
    json_t *got = json_loads(args, JSON_DECODE_ANY, NULL),
           *want = json_loads(want_args, JSON_DECODE_ANY, NULL);
    cr_expect(got && want && json_equal(got, want), "arguments %s, want %s", args, want_args);
    json_decref(got);
    json_decref(want);
}

static const struct {
    enum woolly_chat_tool_syntax syntax;
    const char *text;
    size_t n_calls;      /* 0: no call, all content */
    const char *content; /* the content before the calls */
    const char *name0, *args0, *name1, *args1;
} PARSE_CASES[] = {
    {WOOLLY_TOOLS_HERMES,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", 1, "",
     "get_weather", "{\"city\": \"Paris\"}", NULL, NULL},
    {WOOLLY_TOOLS_HERMES,
     "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>{\"name\": "
     "\"b\", "
     "\"arguments\": {\"x\": [1, 2]}}</tool_call>\n",
     2, "Let me check.", "a", "{}", "b", "{\"x\": [1, 2]}"},
    {WOOLLY_TOOLS_HERMES,
     "<think>\nhm\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"q\\\": 1}\"}", 1,
     "<think>\nhm\n</think>", "f", "{\"q\": 1}", NULL, NULL}, /* arguments as a string; close tag cut off */
    {WOOLLY_TOOLS_MISTRAL, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": \"Oslo\"}]", 1, "", "f", "\"Oslo\"",
     NULL, NULL}, /* a string that holds no JSON: arguments are still JSON text, the string */
    {WOOLLY_TOOLS_HERMES, "{\"name\": \"f\", \"arguments\": {}}", 0, NULL, NULL, NULL, NULL, NULL},
    {WOOLLY_TOOLS_HERMES, "<tool_call>\n{\"name\": \"f\", \"argu", 0, NULL, NULL, NULL, NULL, NULL},
    {WOOLLY_TOOLS_HERMES, "<tool_call>{\"arguments\": {}}</tool_call>", 0, NULL, NULL, NULL, NULL, NULL},
    {WOOLLY_TOOLS_HERMES, "<tool_call>{\"name\": \"f\"}</tool_call> and more words", 0, NULL, NULL, NULL,
     NULL, NULL},
    {WOOLLY_TOOLS_HERMES, "Just text.", 0, NULL, NULL, NULL, NULL, NULL},
    {WOOLLY_TOOLS_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", 1, "",
     "get_weather", "{\"city\": \"Oslo\"}", NULL, NULL},
    {WOOLLY_TOOLS_LLAMA3,
     "  <|python_tag|>{\"name\": \"a\", \"parameters\": {\"n\": 1}}; {\"name\": \"b\", \"parameters\": {}}",
     2, "", "a", "{\"n\": 1}", "b", "{}"},
    {WOOLLY_TOOLS_LLAMA3,
     "{\"name\": \"a\", \"parameters\": {\"n\": 1}}\n{\"name\": \"b\", \"parameters\": {}}\n", 2, "", "a",
     "{\"n\": 1}", "b", "{}"}, /* one a line */
    {WOOLLY_TOOLS_LLAMA3, "Sure: <|python_tag|>{\"name\": \"a\", \"arguments\": {\"n\": 2}}", 1, "Sure:", "a",
     "{\"n\": 2}", NULL, NULL},
    {WOOLLY_TOOLS_LLAMA3, "I think {\"name\": \"a\"} is it", 0, NULL, NULL, NULL, NULL, NULL},
    {WOOLLY_TOOLS_LLAMA3, "{\"answer\": 42}", 0, NULL, NULL, NULL, NULL, NULL},
    {WOOLLY_TOOLS_MISTRAL,
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}, \"id\": \"abc123def\"}]",
     1, "", "get_weather", "{\"city\": \"Rome\"}", NULL, NULL},
    {WOOLLY_TOOLS_MISTRAL,
     "[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"s\": \"t\"}}]", 2, "", "a",
     "{}", "b", "{\"s\": \"t\"}"},
    {WOOLLY_TOOLS_MISTRAL, "[1, 2, 3]", 0, NULL, NULL, NULL, NULL, NULL},
    {WOOLLY_TOOLS_MISTRAL, "[TOOL_CALLS][]", 0, NULL, NULL, NULL, NULL, NULL},
    /* Mistral's newer templates: name, [CALL_ID] id, [ARGS] and the arguments, [TOOL_CALLS] before each;
     * with the markers written out (control tokens the engine spells) or decoded to nothing */
    {WOOLLY_TOOLS_MISTRAL, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}", 1, "", "get_weather",
     "{\"city\": \"Rome\"}", NULL, NULL},
    {WOOLLY_TOOLS_MISTRAL,
     "[TOOL_CALLS]a[CALL_ID]abcDEF123[ARGS]{}[TOOL_CALLS]b[CALL_ID]xyz987UVW[ARGS]{\"s\": \"t\"}</s>", 0,
     NULL, NULL, NULL, NULL, NULL}, /* text after the calls: it is all content */
    {WOOLLY_TOOLS_MISTRAL, "[TOOL_CALLS]a[CALL_ID]abcDEF123[ARGS]{}\n[TOOL_CALLS]b[ARGS]{\"s\": \"t\"}", 2,
     "", "a", "{}", "b", "{\"s\": \"t\"}"},
    {WOOLLY_TOOLS_MISTRAL, "Checking.\n[TOOL_CALLS]get-time[ARGS]{\"tz\": [1, 2]}", 1, "Checking.",
     "get-time", "{\"tz\": [1, 2]}", NULL, NULL},
    {WOOLLY_TOOLS_MISTRAL, "get_weather{\"city\": \"Rome\"}", 1, "", "get_weather", "{\"city\": \"Rome\"}",
     NULL, NULL},
    {WOOLLY_TOOLS_MISTRAL, " a{\"n\": 1} b{}", 2, "", "a", "{\"n\": 1}", "b", "{}"},
    {WOOLLY_TOOLS_MISTRAL, "[TOOL_CALLS]a[ARGS]{} and more words", 0, NULL, NULL, NULL, NULL, NULL},
    {WOOLLY_TOOLS_MISTRAL, "[TOOL_CALLS]a[ARGS]{\"n\": ", 0, NULL, NULL, NULL, NULL, NULL},
    {WOOLLY_TOOLS_MISTRAL, "[TOOL_CALLS]a[ARGS][1]", 0, NULL, NULL, NULL, NULL, NULL},
    {WOOLLY_TOOLS_MISTRAL, "Once upon a time", 0, NULL, NULL, NULL, NULL, NULL},
    {WOOLLY_TOOLS_MISTRAL, "story{not json}", 0, NULL, NULL, NULL, NULL, NULL},
    {WOOLLY_TOOLS_GRANITE, "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}]",
     1, "", "get_weather", "{\"city\": \"Lima\"}", NULL, NULL},
    {WOOLLY_TOOLS_GRANITE, "Checking.<|tool_call|>[{\"name\": \"a\", \"arguments\": {\"k\": null}}]\n", 1,
     "Checking.", "a", "{\"k\": null}", NULL, NULL},
    {WOOLLY_TOOLS_GRANITE,
     "<|tool_call|>[{\"name\": \"a\", \"arguments\": {\"i\": 1}}, {\"name\": \"b\", \"arguments\": {}}]", 2,
     "", "a", "{\"i\": 1}", "b", "{}"},
    {WOOLLY_TOOLS_GRANITE, "<|tool_call|>[{\"name\": \"a\", \"arguments\": {}}] trailing", 0, NULL, NULL,
     NULL, NULL, NULL},
};

Test(server_tool_calls, each_family_parses_back)
{
    for (size_t i = 0; i < sizeof PARSE_CASES / sizeof PARSE_CASES[0]; i++) {
        const char *t = PARSE_CASES[i].text;
        size_t content_end = 12345;
        json_t *calls = srv_tool_calls_parse(PARSE_CASES[i].syntax, t, strlen(t), true, &content_end);
        if (!PARSE_CASES[i].n_calls) {
            cr_expect(calls == NULL, "case %zu (%s): parsed as a call", i, t);
            json_decref(calls);
            continue;
        }
        cr_assert(json_is_array(calls), "case %zu (%s): no call parsed", i, t);
        cr_expect_eq(json_array_size(calls), PARSE_CASES[i].n_calls, "case %zu", i);
        cr_expect_eq(content_end, strlen(PARSE_CASES[i].content), "case %zu: content ends at %zu", i,
                     content_end);
        cr_expect(!strncmp(t, PARSE_CASES[i].content, content_end), "case %zu", i);
        expect_call(PARSE_CASES[i].syntax, calls, 0, PARSE_CASES[i].name0, PARSE_CASES[i].args0);
        if (PARSE_CASES[i].n_calls > 1)
            expect_call(PARSE_CASES[i].syntax, calls, 1, PARSE_CASES[i].name1, PARSE_CASES[i].args1);
        /* ids differ between calls */
        if (PARSE_CASES[i].n_calls > 1)
            cr_expect_str_neq(json_string_value(json_object_get(json_array_get(calls, 0), "id")),
                              json_string_value(json_object_get(json_array_get(calls, 1), "id")));
        json_decref(calls);
        /* parallel_tool_calls false: the first call only, the same content before it */
        content_end = 12345;
        calls = srv_tool_calls_parse(PARSE_CASES[i].syntax, t, strlen(t), false, &content_end);
        cr_assert(json_is_array(calls), "case %zu: no call parsed without parallel calls", i);
        cr_expect_eq(json_array_size(calls), 1, "case %zu: %zu calls without parallel calls", i,
                     json_array_size(calls));
        cr_expect_eq(content_end, strlen(PARSE_CASES[i].content), "case %zu", i);
        expect_call(PARSE_CASES[i].syntax, calls, 0, PARSE_CASES[i].name0, PARSE_CASES[i].args0);
        json_decref(calls);
    }
}

Test(server_tool_calls, streaming_holds_back_what_may_begin_a_call)
{
    static const struct {
        enum woolly_chat_tool_syntax syntax;
        const char *text;
        size_t prefix;
    } CASES[] = {
        {WOOLLY_TOOLS_HERMES, "Hello there", 11},
        {WOOLLY_TOOLS_HERMES, "Hello <tool", 6},
        {WOOLLY_TOOLS_HERMES, "Hello <", 6},
        {WOOLLY_TOOLS_HERMES, "Hi <tool_call>\n{\"na", 3},
        {WOOLLY_TOOLS_HERMES, "a < b", 5},
        {WOOLLY_TOOLS_LLAMA3, "  ", 0},
        {WOOLLY_TOOLS_LLAMA3, " {\"name\"", 0},
        {WOOLLY_TOOLS_LLAMA3, "Sure <|python", 5},
        {WOOLLY_TOOLS_LLAMA3, "Sure thing", 10},
        {WOOLLY_TOOLS_MISTRAL, "[{\"na", 0},
        {WOOLLY_TOOLS_MISTRAL, "Ok [TOOL_CALLS][", 3},
        {WOOLLY_TOOLS_MISTRAL, "Hello", 0}, /* may be a call's name yet */
        {WOOLLY_TOOLS_MISTRAL, "Hello there", 11},
        {WOOLLY_TOOLS_MISTRAL, "get_weather[AR", 0},
        {WOOLLY_TOOLS_MISTRAL, "get_weather[CALL_ID]ab", 0},
        {WOOLLY_TOOLS_MISTRAL, "get_weather{\"ci", 0},
        {WOOLLY_TOOLS_MISTRAL, "Hi. [TOOL_CALLS]f", 4},
        {WOOLLY_TOOLS_MISTRAL, "a[b] c", 6},
        {WOOLLY_TOOLS_GRANITE, "Ok <|tool_c", 3},
        {WOOLLY_TOOLS_GRANITE, "", 0},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        cr_expect_eq(srv_tool_calls_content_prefix(CASES[i].syntax, CASES[i].text, strlen(CASES[i].text)),
                     CASES[i].prefix, "case %zu (%s)", i, CASES[i].text);
}

/* A SentencePiece vocabulary with Mistral's tool-call markers as control tokens (or, with `plain`, as
 * normal tokens, which decode to their text anyway) and the pieces of one call. */
static woolly_tokenizer *mistral_like_vocab(bool plain)
{
    static const char *const TOKS[] = {"<unk>",           "<s>",       "</s>",        "[TOOL_CALLS]",
                                       "[ARGS]",          "[CALL_ID]", "get_weather", "{\"city\":",
                                       "\u2581\"Rome\"}", "abcDEF123", "\u2581Hi."};
    const int32_t mark = plain ? 1 : 3;
    const int32_t types[] = {2, 3, 3, mark, mark, mark, 1, 1, 1, 1, 1};
    const float scores[] = {0, 0, 0, 0, 0, 0, -1, -1, -1, -1, -1};
    const size_t n = sizeof TOKS / sizeof TOKS[0];
    const char *path = tu_tmp_path(plain ? "mistral_plain.gguf" : "mistral_like.gguf");
    woolly_error err = {{0}};
    gguf_writer *w = gguf_writer_open(path, &err);
    cr_assert(w != NULL, "%s", err.msg);
    gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char **)TOKS, n);
    gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", scores, n);
    gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, n);
    cr_assert_eq(gguf_writer_write_header(w, &err), 0, "%s", err.msg);
    cr_assert_eq(gguf_writer_close(w, &err), 0, "%s", err.msg);
    woolly_tokenizer *t = woolly_tokenizer_open_file(path, &err);
    cr_assert(t != NULL, "%s", err.msg);
    return t;
}

/* The output's text as the engine writes it (runtime/server/slot.c): each token's decoded bytes, and the
 * vocabulary text of a spelled marker token. */
static size_t engine_text(const woolly_tokenizer *t, const int32_t *spelled, int n_spelled,
                          const int32_t *ids, size_t n, char *out, size_t cap)
{
    woolly_detok_stream ds;
    woolly_detok_stream_init(&ds, t);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        const int64_t k = woolly_detok_stream_feed(&ds, ids[i], out + len, cap - len);
        cr_assert(k >= 0);
        len += (size_t)k;
        for (int m = 0; m < n_spelled; m++)
            if (spelled[m] == ids[i]) {
                const char *p = woolly_tokenizer_piece(t, ids[i]);
                cr_assert(len + strlen(p) < cap);
                memcpy(out + len, p, strlen(p));
                len += strlen(p);
            }
    }
    out[len] = 0;
    return len;
}

/* Mistral's [TOOL_CALLS], [ARGS] and [CALL_ID] are control tokens: decoded they are nothing, so the
 * engine writes them out in a tools request, and the parser finds the call and its content before it. A
 * vocabulary where they are normal tokens, or another family's, has nothing to spell. */
Test(server_tool_calls, mistral_control_markers_are_spelled)
{
    woolly_tokenizer *t = mistral_like_vocab(false);
    int32_t spelled[SRV_MAX_SPELLED];
    const int n = srv_tool_marker_tokens(WOOLLY_TOOLS_MISTRAL, t, spelled, SRV_MAX_SPELLED);
    cr_assert_eq(n, 3);
    cr_expect(spelled[0] == 3 && spelled[1] == 4 && spelled[2] == 5);
    cr_expect_eq(srv_tool_marker_tokens(WOOLLY_TOOLS_HERMES, t, spelled + 3, 1), 0);
    cr_expect_eq(srv_tool_marker_tokens(WOOLLY_TOOLS_MISTRAL, t, spelled + 3, 1), 1, "cap");

    /* Hi. [TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{"city": "Rome"} */
    static const int32_t IDS[] = {10, 3, 6, 5, 9, 4, 7, 8};
    char text[256], plain_text[256];
    const size_t len = engine_text(t, spelled, n, IDS, 8, text, sizeof text);
    cr_expect_str_eq(text, "Hi.[TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{\"city\": \"Rome\"}");
    size_t content_end = 0;
    json_t *calls = srv_tool_calls_parse(WOOLLY_TOOLS_MISTRAL, text, len, true, &content_end);
    cr_assert(json_is_array(calls), "%s", text);
    cr_expect_eq(json_array_size(calls), 1);
    cr_expect_eq(content_end, 3);
    expect_call(WOOLLY_TOOLS_MISTRAL, calls, 0, "get_weather", "{\"city\": \"Rome\"}");
    json_decref(calls);
    cr_expect_eq(srv_tool_calls_content_prefix(WOOLLY_TOOLS_MISTRAL, text, len), 3);

    /* Without the spelling the same tokens are "Hi.get_weather..." : no call found, the markers lost. */
    const size_t plain_len = engine_text(t, spelled, 0, IDS, 8, plain_text, sizeof plain_text);
    calls = srv_tool_calls_parse(WOOLLY_TOOLS_MISTRAL, plain_text, plain_len, true, &content_end);
    cr_expect(calls == NULL, "%s", plain_text);
    json_decref(calls);
    /* ... but a call alone without an id, its markers decoded to nothing, still parses (with the id the
     * name and the id would run together: only the spelled markers split them) */
    static const int32_t BARE[] = {3, 6, 4, 7, 8};
    const size_t bare_len = engine_text(t, spelled, 0, BARE, 5, plain_text, sizeof plain_text);
    cr_expect_str_eq(plain_text, "get_weather{\"city\": \"Rome\"}");
    calls = srv_tool_calls_parse(WOOLLY_TOOLS_MISTRAL, plain_text, bare_len, true, &content_end);
    cr_assert(json_is_array(calls), "%s", plain_text);
    expect_call(WOOLLY_TOOLS_MISTRAL, calls, 0, "get_weather", "{\"city\": \"Rome\"}");
    json_decref(calls);
    woolly_tokenizer_close(t);

    t = mistral_like_vocab(true);
    cr_expect_eq(srv_tool_marker_tokens(WOOLLY_TOOLS_MISTRAL, t, spelled, SRV_MAX_SPELLED), 0);
    woolly_tokenizer_close(t);
}

/* Whether the grammar accepts text as a whole sentence. */
static bool accepts(const woolly_grammar *g, const char *text)
{
    woolly_error e;
    woolly_gmatch *m = woolly_gmatch_open(g, &e);
    cr_assert(m != NULL, "%s", e.msg);
    const bool ok = woolly_gmatch_accept(m, text, strlen(text)) == 0 && woolly_gmatch_can_end(m);
    woolly_gmatch_free(m);
    return ok;
}

static const char TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": "
    "\"object\", "
    "\"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": "
    "[\"city\", "
    "\"days\"], \"additionalProperties\": false}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"now\"}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"walk\", \"parameters\": {\"$defs\": {\"pt\": "
    "{\"type\": \"array\", "
    "\"items\": {\"type\": \"number\"}, \"minItems\": 2, \"maxItems\": 2}}, \"type\": \"object\", "
    "\"properties\": {\"to\": "
    "{\"$ref\": \"#/$defs/pt\"}}, \"required\": [\"to\"], \"additionalProperties\": false}}}]";

static woolly_grammar *form_grammar(enum woolly_chat_tool_syntax syntax, bool named, const char *only,
                                    bool parallel)
{
    json_t *tools = json_loads(TOOLS, 0, NULL);
    cr_assert(tools != NULL);
    char err[512];
    char *gbnf = srv_tool_call_gbnf(syntax, named, tools, only, parallel, err, sizeof err);
    cr_assert(gbnf != NULL, "%s", err);
    woolly_error e;
    woolly_grammar *g = woolly_grammar_from_gbnf(gbnf, strlen(gbnf), &e);
    cr_assert(g != NULL, "%s\n%s", e.msg, gbnf);
    free(gbnf);
    json_decref(tools);
    return g;
}

static woolly_grammar *call_grammar(enum woolly_chat_tool_syntax syntax, const char *only, bool parallel)
{
    return form_grammar(syntax, false, only, parallel);
}

Test(server_tool_calls, the_grammar_of_a_required_call)
{
    woolly_grammar *g = call_grammar(WOOLLY_TOOLS_HERMES, NULL, false);
    cr_expect(accepts(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", "
                         "\"days\": 3}}\n</tool_call>"));
    cr_expect(accepts(g, "<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>"));
    cr_expect(
        accepts(g, "<tool_call>\n{\"name\": \"walk\", \"arguments\": {\"to\": [1.5, -2]}}\n</tool_call>"));
    cr_expect(!accepts(
        g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
    cr_expect(!accepts(g, "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"));
    cr_expect(!accepts(g, "<tool_call>\n{\"name\": \"walk\", \"arguments\": {\"to\": [1]}}\n</tool_call>"));
    cr_expect(!accepts(g, "{\"name\": \"now\", \"arguments\": {}}"));
    woolly_grammar_free(g);

    g = call_grammar(WOOLLY_TOOLS_LLAMA3, "now", false);
    cr_expect(accepts(g, "{\"name\": \"now\", \"parameters\": {}}"));
    cr_expect(!accepts(g, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"a\", \"days\": 1}}"));
    woolly_grammar_free(g);

    g = call_grammar(WOOLLY_TOOLS_MISTRAL, "get_weather", false);
    cr_expect(accepts(g, "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\", \"days\": 1}}]"));
    cr_expect(!accepts(g, "[{\"name\": \"now\", \"arguments\": {}}]"));
    woolly_grammar_free(g);

    g = call_grammar(WOOLLY_TOOLS_GRANITE, NULL, false);
    cr_expect(accepts(g, "[{\"name\": \"now\", \"arguments\": {}}]"));
    cr_expect(
        !accepts(g, "[{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"now\", \"arguments\": {}}]"));
    woolly_grammar_free(g);
}

/* parallel_tool_calls true: the grammar of a required call takes 1 to SRV_MAX_PARALLEL_CALLS calls where
 * the family's syntax lists several, each a tool's; Llama 3's one call a turn stays one. */
Test(server_tool_calls, the_grammar_of_parallel_calls)
{
    static const char NOW[] = "{\"name\": \"now\", \"arguments\": {}}",
                      WALK[] = "{\"name\": \"walk\", \"arguments\": {\"to\": [1, 2]}}",
                      BAD[] = "{\"name\": \"walk\", \"arguments\": {}}";
    char text[1024];
    woolly_grammar *g = call_grammar(WOOLLY_TOOLS_HERMES, NULL, true);
    snprintf(text, sizeof text, "<tool_call>\n%s\n</tool_call>", NOW);
    cr_expect(accepts(g, text));
    snprintf(text, sizeof text, "<tool_call>\n%s\n</tool_call>\n<tool_call>\n%s\n</tool_call>", NOW, WALK);
    cr_expect(accepts(g, text));
    snprintf(text, sizeof text, "<tool_call>\n%s\n</tool_call>\n<tool_call>\n%s\n</tool_call>", NOW, BAD);
    cr_expect(!accepts(g, text));
    woolly_grammar_free(g);

    for (int k = 0; k < 2; k++) {
        g = call_grammar(k ? WOOLLY_TOOLS_GRANITE : WOOLLY_TOOLS_MISTRAL, NULL, true);
        snprintf(text, sizeof text, "[%s]", WALK);
        cr_expect(accepts(g, text));
        snprintf(text, sizeof text, "[%s, %s, %s]", WALK, NOW, WALK);
        cr_expect(accepts(g, text));
        snprintf(text, sizeof text, "[%s, %s]", WALK, BAD);
        cr_expect(!accepts(g, text));
        cr_expect(!accepts(g, "[]"));
        size_t len = 0; /* SRV_MAX_PARALLEL_CALLS calls, and no more */
        len += (size_t)snprintf(text + len, sizeof text - len, "[%s", NOW);
        for (int c = 1; c < SRV_MAX_PARALLEL_CALLS; c++)
            len += (size_t)snprintf(text + len, sizeof text - len, ", %s", NOW);
        cr_expect(accepts(g, strcat(text, "]")));
        text[len] = 0;
        cr_expect(!accepts(g, strcat(text, ", {\"name\": \"now\", \"arguments\": {}}]")));
        woolly_grammar_free(g);
    }

    g = call_grammar(WOOLLY_TOOLS_LLAMA3, NULL, true);
    cr_expect(accepts(g, "{\"name\": \"now\", \"parameters\": {}}"));
    cr_expect(
        !accepts(g, "{\"name\": \"now\", \"parameters\": {}}; {\"name\": \"now\", \"parameters\": {}}"));
    woolly_grammar_free(g);
}

/* Mistral's newer templates (they write [ARGS]): a required call is the tool's name and its arguments,
 * `name{...}`, each tool's arguments held to its own schema; parsed back as a call. */
Test(server_tool_calls, the_grammar_of_mistral_named_calls)
{
    woolly_grammar *g = form_grammar(WOOLLY_TOOLS_MISTRAL, true, NULL, false);
    cr_expect(accepts(g, "get_weather{\"city\": \"Oslo\", \"days\": 3}"));
    cr_expect(accepts(g, "now{}"));
    cr_expect(accepts(g, "walk{\"to\": [1.5, -2]}"));
    cr_expect(!accepts(g, "get_weather{\"city\": \"Oslo\"}"), "days is required");
    cr_expect(!accepts(g, "now{\"to\": [1, 2]}"), "walk's arguments under now's name");
    cr_expect(!accepts(g, "walk{\"to\": [1]}"));
    cr_expect(!accepts(g, "nope{}"));
    cr_expect(!accepts(g, "[{\"name\": \"now\", \"arguments\": {}}]"), "the v3 array");
    cr_expect(!accepts(g, "now{}now{}"), "one call without parallel_tool_calls");
    woolly_grammar_free(g);

    g = form_grammar(WOOLLY_TOOLS_MISTRAL, true, "walk", true);
    cr_expect(accepts(g, "walk{\"to\": [1, 2]}walk{\"to\": [3, 4]}"));
    cr_expect(!accepts(g, "now{}"), "only the named tool");
    char text[1024] = "";
    for (int c = 0; c < SRV_MAX_PARALLEL_CALLS; c++)
        strcat(text, "walk{\"to\": [1, 2]}");
    cr_expect(accepts(g, text));
    cr_expect(!accepts(g, strcat(text, "walk{\"to\": [1, 2]}")), "at most SRV_MAX_PARALLEL_CALLS calls");
    woolly_grammar_free(g);

    /* what the grammar lets through, the parser takes */
    static const char TWO[] = "walk{\"to\": [1, 2]}now{}";
    size_t content_end = 99;
    json_t *calls = srv_tool_calls_parse(WOOLLY_TOOLS_MISTRAL, TWO, strlen(TWO), true, &content_end);
    cr_assert(calls != NULL);
    cr_expect_eq(json_array_size(calls), 2);
    const json_t *second = json_object_get(json_array_get(calls, 1), "function");
    cr_expect_str_eq(json_string_value(json_object_get(second, "name")), "now");
    cr_expect_eq(content_end, 0);
    json_decref(calls);
}

/* The newer form is the template's: Mistral Small 3.2's writes [ARGS], Nemo's writes the v3 array. */
Test(server_tool_calls, the_named_form_comes_from_the_template)
{
    static const struct {
        const char *file;
        bool named;
    } CASES[] = {{"mistral-small-3.2-instruct-2506.jinja", true},
                 {"mistral-nemo-instruct-2407.jinja", false},
                 {"qwen3.jinja", false}};
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tests/data/chat/%s", WOOLLY_SOURCE_DIR, CASES[i].file);
        char *tmpl = tu_read_file(path, NULL);
        cr_assert(tmpl != NULL, "%s", path);
        woolly_chat_format f;
        cr_assert_eq(woolly_chat_format_open(&f, tmpl, "<s>", "</s>", -1, "test"), 0, "%s", path);
        cr_expect(f.jinja != NULL, "%s renders", CASES[i].file);
        cr_expect_eq(f.named_calls, CASES[i].named, "%s", CASES[i].file);
        woolly_chat_format_close(&f);
        free(tmpl);
    }
}

static srv_gen_rules rules(enum woolly_chat_family fam)
{
    return (srv_gen_rules){.model_id = "m",
                           .defaults = woolly_sampler_default_params(),
                           .n_vocab = 100,
                           .max_tokens_limit = 64,
                           .chat = woolly_chat_builtin(fam)};
}

#define WEATHER                                                                                              \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather\", "      \
    "\"parameters\": "                                                                                       \
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}"
#define USER "\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Paris?\"}]"

Test(server_tool_calls, bad_requests_name_the_field)
{
    static const struct {
        const char *body, *param, *in_message;
    } CASES[] = {
        {"{" USER ", \"tools\": {}}", "tools", "array"},
        {"{" USER ", \"tools\": [5]}", "tools", "tools[0]"},
        {"{" USER ", \"tools\": [{\"type\": \"code\"}]}", "tools", "function"},
        {"{" USER ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a b\"}}]}", "tools",
         "name"},
        {"{" USER ", \"tools\": [{\"type\": \"function\", \"function\": {}}]}", "tools", "name"},
        {"{" USER ", \"tools\": [" WEATHER ", " WEATHER "]}", "tools", "both named"},
        {"{" USER
         ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": "
         "\"string\", \"pattern\": \"a+\"}}}]}",
         "tools", "pattern"},
        {"{" USER
         ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": 7}}]}",
         "tools", "parameters"},
        {"{" USER ", \"tools\": [" WEATHER "], \"tool_choice\": \"always\"}", "tool_choice", "always"},
        {"{" USER ", \"tools\": [" WEATHER "], \"tool_choice\": 3}", "tool_choice", "tool_choice"},
        {"{" USER ", \"tools\": [" WEATHER
         "], \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": "
         "\"get_time\"}}}",
         "tool_choice", "get_time"},
        {"{" USER ", \"tools\": [" WEATHER "], \"tool_choice\": {\"type\": \"function\"}}", "tool_choice",
         "name"},
        {"{" USER ", \"tool_choice\": \"required\"}", "tool_choice", "no 'tools'"},
        {"{" USER
         ", \"tools\": [], \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"f\"}}}",
         "tool_choice", "no 'tools'"},
        {"{" USER ", \"tools\": [" WEATHER
         "], \"tool_choice\": \"required\", \"response_format\": {\"type\": "
         "\"json_object\"}}",
         "tool_choice", "exclude"},
        {"{\"messages\": [{\"role\": \"tool\", \"content\": \"21\"}]}", "messages", "tool_call_id"},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c\", "
         "\"type\": "
         "\"function\", \"function\": {\"arguments\": \"{}\"}}]}]}",
         "messages", "tool_calls[0]"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"tool_calls\": [{\"id\": \"c\"}]}]}",
         "messages", "assistant"},
        {"{\"prompt\": \"x\", \"tools\": [" WEATHER "]}", "tools", "not supported"},
        {"{" USER ", \"tools\": [" WEATHER "], \"parallel_tool_calls\": \"yes\"}", "parallel_tool_calls",
         "boolean"},
        {"{" USER ", \"parallel_tool_calls\": 1}", "parallel_tool_calls", "boolean"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const srv_gen_rules ru = rules(WOOLLY_CHAT_CHATML);
        srv_gen_request r;
        srv_error e = {0};
        const enum srv_gen_kind kind =
            strstr(CASES[i].body, "\"prompt\"") ? SRV_GEN_COMPLETION : SRV_GEN_CHAT;
        cr_expect_eq(srv_gen_request_parse(CASES[i].body, strlen(CASES[i].body), kind, &ru, &r, &e), -1,
                     "case %zu", i);
        cr_expect_eq(e.status, 400, "case %zu: %d %s", i, e.status, e.message);
        cr_expect_str_eq(e.param, CASES[i].param, "case %zu: %s", i, e.message);
        cr_expect(strstr(e.message, CASES[i].in_message) != NULL, "case %zu: '%s' does not mention '%s'", i,
                  e.message, CASES[i].in_message);
        srv_gen_request_free(&r);
    }
}

/* parallel_tool_calls: several calls parsed unless the request says false; the grammar of a required
 * call takes several only when it says true. */
Test(server_tool_calls, parallel_tool_calls_is_read)
{
    static const struct {
        const char *field;
        bool parallel, several;
    } CASES[] = {{"", true, false},
                 {", \"parallel_tool_calls\": null", true, false},
                 {", \"parallel_tool_calls\": true", true, true},
                 {", \"parallel_tool_calls\": false", false, false}};
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char body[1024];
        snprintf(body, sizeof body, "{" USER ", \"tools\": [" WEATHER "], \"tool_choice\": \"required\"%s}",
                 CASES[i].field);
        const srv_gen_rules ru = rules(WOOLLY_CHAT_GRANITE);
        srv_gen_request r;
        srv_error e = {0};
        cr_assert_eq(srv_gen_request_parse(body, strlen(body), SRV_GEN_CHAT, &ru, &r, &e), 0, "%s",
                     e.message);
        cr_expect_eq(r.tools.parallel, CASES[i].parallel, "case %zu", i);
        cr_expect_eq(r.tools.parallel_required, CASES[i].several, "case %zu", i);
        cr_assert(r.grammar != NULL);
        static const char ONE[] = "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}";
        char two[256];
        snprintf(two, sizeof two, "%s, %s]", ONE, ONE + 1);
        cr_expect_eq(accepts(r.grammar, two), CASES[i].several, "case %zu", i);
        srv_gen_request_free(&r);
    }
}

/* A conversation with tools, a call and its result renders through each built-in in its family's syntax;
 * tool_choice sets the request's constraint. */
Test(server_tool_calls, built_ins_render_tools_calls_and_results)
{
    static const char BODY[] =
        "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", "
        "\"content\": \"Weather?\"}, "
        "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call_9\", \"type\": "
        "\"function\", "
        "\"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}}]}, "
        "{\"role\": \"tool\", \"tool_call_id\": \"call_9\", \"content\": \"sunny\"}], \"tools\": [" WEATHER
        "], "
        "\"tool_choice\": \"required\"}";
    static const struct {
        enum woolly_chat_family fam;
        const char *tools, *call, *result;
    } CASES[] = {
        {WOOLLY_CHAT_CHATML, "<tools>\n{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"",
         "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
         "{\"city\":\"Paris\"}}\n</tool_call><|im_end|>",
         "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>"},
        {WOOLLY_CHAT_LLAMA3, "\"parameters\": <arguments object>",
         "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": "
         "{\"city\":\"Paris\"}}",
         "<|start_header_id|>ipython<|end_header_id|>\n\nsunny<|eot_id|>"},
        {WOOLLY_CHAT_GRANITE, "<|tool_call|> followed by",
         "<|start_of_role|>assistant<|end_of_role|><|tool_call|>[{\"name\": \"get_weather\", \"arguments\": "
         "{\"city\":\"Paris\"}}]",
         "<|start_of_role|>tool_response<|end_of_role|>sunny<|end_of_text|>"},
        {WOOLLY_CHAT_MISTRAL_V7, "[TOOL_CALLS] followed by",
         "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}]</s>",
         "[INST][TOOL_RESULTS]{\"content\": \"sunny\"}[/TOOL_RESULTS][/INST]"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const srv_gen_rules ru = rules(CASES[i].fam);
        srv_gen_request r;
        srv_error e = {0};
        cr_assert_eq(srv_gen_request_parse(BODY, strlen(BODY), SRV_GEN_CHAT, &ru, &r, &e), 0, "%s",
                     e.message);
        cr_expect(strstr(r.prompt, CASES[i].tools) != NULL, "%s: no tools in\n%s",
                  woolly_chat_family_name(CASES[i].fam), r.prompt);
        cr_expect(strstr(r.prompt, CASES[i].call) != NULL, "%s: no call in\n%s",
                  woolly_chat_family_name(CASES[i].fam), r.prompt);
        cr_expect(strstr(r.prompt, CASES[i].result) != NULL, "%s: no result in\n%s",
                  woolly_chat_family_name(CASES[i].fam), r.prompt);
        cr_expect(r.grammar != NULL);
        cr_expect_eq(r.tools.choice, SRV_TOOL_CHOICE_REQUIRED);
        cr_expect_eq(r.tools.syntax, woolly_chat_tool_syntax_of(CASES[i].fam));
        srv_gen_request_free(&r);
    }
}

/* The model's own template gets the tools, the calls (their arguments as objects) and the results:
 * the families' published templates render them in their own syntax. */
Test(server_tool_calls, own_templates_render_tools_calls_and_results)
{
    static const char BODY[] =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather?\"}, "
        "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"abcDEF123\", \"type\": "
        "\"function\", "
        "\"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}}]}, "
        "{\"role\": \"tool\", \"tool_call_id\": \"abcDEF123\", \"content\": \"sunny\"}], \"tools\": [" WEATHER
        "]}";
    static const struct {
        const char *file, *tools, *call, *result;
    } CASES[] = {
        {"qwen3.jinja", "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"",
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
         "<tool_response>\nsunny\n</tool_response>"},
        {"qwen2.5-instruct.jinja",
         "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"",
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
         "<tool_response>\nsunny\n</tool_response>"},
        {"llama-3.1-instruct.jinja", "\"name\": \"get_weather\"",
         "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
         "<|start_header_id|>ipython<|end_header_id|>\n\n\"sunny\"<|eot_id|>"},
        /* Granite 3.3's template writes an assistant's content only, not its tool_calls */
        {"granite-3.3-instruct.jinja",
         "<|start_of_role|>available_tools<|end_of_role|>[\n    {\n        \"type\": \"function\"",
         "<|start_of_role|>assistant<|end_of_role|><|end_of_text|>",
         "<|start_of_role|>tool<|end_of_role|>sunny<|end_of_text|>"},
        {"mistral-small-3.2-instruct-2506.jinja", "[AVAILABLE_TOOLS]",
         "[TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{\"city\": \"Paris\"}", "[TOOL_RESULTS]"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tests/data/chat/%s", WOOLLY_SOURCE_DIR, CASES[i].file);
        char *tmpl = tu_read_file(path, NULL);
        woolly_chat_format f;
        cr_assert_eq(woolly_chat_format_open(&f, tmpl, "<s>", "</s>", -1, "test"), 0, "%s", CASES[i].file);
        cr_assert(f.jinja != NULL, "%s: the interpreter does not take it", CASES[i].file);
        srv_gen_rules ru = rules(WOOLLY_CHAT_CHATML);
        ru.chat = &f;
        srv_gen_request r;
        srv_error e = {0};
        cr_assert_eq(srv_gen_request_parse(BODY, strlen(BODY), SRV_GEN_CHAT, &ru, &r, &e), 0, "%s: %s",
                     CASES[i].file, e.message);
        cr_expect(strstr(r.prompt, CASES[i].tools) != NULL, "%s: no tools in\n%s", CASES[i].file, r.prompt);
        cr_expect(strstr(r.prompt, CASES[i].call) != NULL, "%s: no call in\n%s", CASES[i].file, r.prompt);
        cr_expect(strstr(r.prompt, CASES[i].result) != NULL, "%s: no result in\n%s", CASES[i].file, r.prompt);
        cr_expect_eq(r.tools.choice, SRV_TOOL_CHOICE_AUTO);
        cr_expect(r.grammar == NULL, "auto is free text");
        srv_gen_request_free(&r);
        woolly_chat_format_close(&f);
        free(tmpl);
    }
}
