/* The server's parts on their own: the stop-string matcher, UTF-8 repair, the API key comparison, and
 * the parsing and checking of generation requests (defaults, ranges, chat rendering). */
#include <criterion/criterion.h>
#include <float.h>
#include <string.h>

#include "request.h"
#include "routes.h"
#include "stop.h"
#include "text.h"

static void feed_all(srv_stop *s, const char *const *pieces, int n, srv_buf *out, int *stopped_at)
{
    *stopped_at = -1;
    for (int i = 0; i < n; i++) {
        const int rc = srv_stop_feed(s, pieces[i], strlen(pieces[i]), out);
        cr_assert_geq(rc, 0);
        if (rc == 1) {
            *stopped_at = i;
            return;
        }
    }
    srv_stop_flush(s, out);
}

Test(server_parts, stop_strings_across_pieces)
{
    char *words[] = {"lo W", "zzz"};
    static const struct {
        const char *pieces[4];
        int n, stopped_at;
        const char *out;
    } CASES[] = {
        {{"Hel", "lo Wo", "rld"}, 3, 1, "Hel"},
        {{"Hello", " ", "World"}, 3, 2, "Hel"},
        {{"Hello", " w", "orld"}, 3, -1, "Hello world"},
        {{"lo W"}, 1, 0, ""},
        {{"zz", "z"}, 2, 1, ""},
        {{"a zz", "y"}, 2, -1, "a zzy"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        srv_stop s;
        srv_stop_init(&s, words, 2);
        srv_buf out = {0};
        srv_buf_append(&out, "", 0);
        int at;
        feed_all(&s, CASES[i].pieces, CASES[i].n, &out, &at);
        cr_expect_eq(at, CASES[i].stopped_at, "case %zu", i);
        cr_expect_str_eq(out.p, CASES[i].out, "case %zu", i);
        srv_buf_free(&out);
        srv_stop_free(&s);
    }
}

Test(server_parts, held_text_is_released_as_soon_as_it_cannot_match)
{
    char *words[] = {"world"};
    srv_stop s;
    srv_stop_init(&s, words, 1);
    srv_buf out = {0};
    cr_expect_eq(srv_stop_feed(&s, "hello wor", 9, &out), 0);
    cr_expect_str_eq(out.p, "hello ", "only the possible beginning 'wor' is held");
    cr_expect_eq(srv_stop_feed(&s, "m", 1, &out), 0);
    cr_expect_str_eq(out.p, "hello worm");
    cr_expect_eq(srv_stop_feed(&s, "s w", 3, &out), 0);
    cr_expect_str_eq(out.p, "hello worms ");
    cr_expect_eq(srv_stop_feed(&s, "orld!", 5, &out), 1);
    cr_expect_str_eq(out.p, "hello worms ");
    srv_buf_free(&out);
    srv_stop_free(&s);

    /* The earliest stop string wins; empty ones mean nothing. */
    char *two[] = {"", "b", "abc"};
    srv_stop_init(&s, two, 3);
    cr_expect_eq(s.n, 2);
    cr_expect_eq(srv_stop_feed(&s, "xabcd", 5, &out), 1);
    cr_expect_str_eq(out.p, "x");
    srv_buf_free(&out);
    srv_stop_free(&s);

    /* Multibyte stop strings are held whole. */
    char *snow[] = {"\xe2\x9d\x84!"};
    srv_stop_init(&s, snow, 1);
    cr_expect_eq(srv_stop_feed(&s, "a\xe2\x9d\x84", 4, &out), 0);
    cr_expect_str_eq(out.p, "a");
    cr_expect_eq(srv_stop_feed(&s, "?", 1, &out), 0);
    cr_expect_str_eq(out.p, "a\xe2\x9d\x84?");
    srv_buf_free(&out);
    srv_stop_free(&s);
}

Test(server_parts, utf8_repair)
{
    static const struct {
        const char *in;
        size_t n;
        const char *out;
    } CASES[] = {
        {"plain", 5, "plain"},
        {"a\xff"
         "b",
         3,
         "a\xEF\xBF\xBD"
         "b"},
        {"\xc0\xaf", 2, "\xEF\xBF\xBD\xEF\xBF\xBD"},                                 /* overlong '/' */
        {"\xed\xa0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},                 /* a surrogate */
        {"\xf4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* past U+10FFFF */
        {"\xf0\x9f\x90\x91 ok", 7, "\xf0\x9f\x90\x91 ok"},                           /* a sheep */
        {"\xe2\x82", 2, "\xEF\xBF\xBD\xEF\xBF\xBD"},                                 /* cut short */
        {"a\0b", 3, "a\0b"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        srv_buf b = {0};
        cr_assert_eq(srv_buf_append_utf8(&b, CASES[i].in, CASES[i].n), 0);
        const size_t want = i == 7 ? 3 : strlen(CASES[i].out);
        cr_expect_eq(b.len, want, "case %zu: %zu bytes", i, b.len);
        cr_expect(!memcmp(b.p, CASES[i].out, want), "case %zu", i);
        cr_expect(srv_utf8_valid(b.p, b.len), "case %zu: the repaired text is not UTF-8", i);
        srv_buf_free(&b);
    }
    cr_expect(!srv_utf8_valid("\xc3", 1));
    cr_expect(srv_utf8_valid("\xc3\xa9", 2));
}

Test(server_parts, api_key_comparison)
{
    cr_expect(srv_key_matches("Bearer k3y", "k3y"));
    cr_expect(srv_key_matches("bearer k3y", "k3y"), "the scheme is case-insensitive");
    cr_expect(!srv_key_matches(NULL, "k3y"));
    cr_expect(!srv_key_matches("", "k3y"));
    cr_expect(!srv_key_matches("k3y", "k3y"));
    cr_expect(!srv_key_matches("Bearer k3", "k3y"));
    cr_expect(!srv_key_matches("Bearer k3yy", "k3y"));
    cr_expect(!srv_key_matches("Bearer K3y", "k3y"));
    cr_expect(!srv_key_matches("Basic k3y", "k3y"));
}

static srv_gen_rules rules(void)
{
    return (srv_gen_rules){.model_id = "m",
                           .defaults = woolly_sampler_default_params(),
                           .n_vocab = 100,
                           .max_tokens_limit = 64,
                           .chat = woolly_chat_builtin(WOOLLY_CHAT_CHATML)};
}

static int parse(const char *body, enum srv_gen_kind kind, srv_gen_request *r, srv_error *e)
{
    const srv_gen_rules ru = rules();
    return srv_gen_request_parse(body, strlen(body), kind, &ru, r, e);
}

Test(server_parts, request_defaults_and_overrides)
{
    srv_gen_request r;
    srv_error e;
    cr_assert_eq(parse("{\"prompt\":\"hi\"}", SRV_GEN_COMPLETION, &r, &e), 0, "%s", e.message);
    const woolly_sampler_params d = woolly_sampler_default_params();
    cr_expect_eq(r.sp.temp, d.temp);
    cr_expect_eq(r.sp.top_k, d.top_k);
    cr_expect_eq(r.max_tokens, 64, "without max_tokens, the server's limit is the request's");
    cr_expect(!r.stream && !r.seed_given);
    cr_expect_str_eq(r.prompt, "hi");
    srv_gen_request_free(&r);

    cr_assert_eq(parse("{\"model\":\"m\",\"prompt\":[5,6],\"max_tokens\":9,\"max_completion_tokens\":7,"
                       "\"temperature\":0,\"top_p\":0,\"top_k\":3,\"min_p\":0.2,\"seed\":-1,\"stop\":\"\\n\","
                       "\"presence_penalty\":-2,\"frequency_penalty\":2,\"repeat_penalty\":1.5,\"n\":1,"
                       "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"user\":\"ignored\","
                       "\"logprobs\":false,\"response_format\":{\"type\":\"text\"}}",
                       SRV_GEN_COMPLETION, &r, &e),
                 0, "%s", e.message);
    cr_expect_eq(r.max_tokens, 7, "max_completion_tokens wins over max_tokens");
    cr_expect_eq(r.sp.temp, 0.0f);
    cr_expect_eq(r.sp.top_p, FLT_MIN, "top_p 0 keeps only the most likely token");
    cr_expect_eq(r.sp.top_k, 3);
    cr_expect_float_eq(r.sp.min_p, 0.2f, 1e-7);
    cr_expect_eq(r.sp.seed, UINT64_MAX);
    cr_expect(r.seed_given && r.stream && r.include_usage);
    cr_expect_eq(r.sp.presence_penalty, -2.0f);
    cr_expect_eq(r.sp.frequency_penalty, 2.0f);
    cr_expect_eq(r.sp.repeat_penalty, 1.5f);
    cr_expect_eq(r.n_stop, 1);
    cr_expect_str_eq(r.stop[0], "\n");
    cr_expect_eq(r.n_ids, 2);
    cr_expect(r.ids[0] == 5 && r.ids[1] == 6);
    srv_gen_request_free(&r);
}

Test(server_parts, chat_messages_are_rendered_with_the_template)
{
    srv_gen_request r;
    srv_error e;
    cr_assert_eq(
        parse("{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":"
              "[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":"
              "\"assistant\",\"content\":null},{\"role\":\"user\",\"content\":\"c\"}]}",
              SRV_GEN_CHAT, &r, &e),
        0, "%s", e.message);
    cr_expect_str_eq(r.prompt, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nab<|im_end|>\n"
                               "<|im_start|>assistant\n<|im_end|>\n<|im_start|>user\nc<|im_end|>\n"
                               "<|im_start|>assistant\n");
    srv_gen_request_free(&r);

    srv_gen_rules ru = rules();
    ru.chat = woolly_chat_builtin(WOOLLY_CHAT_LLAMA2);
    static const char LATE_SYSTEM[] =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\","
        "\"content\":\"b\"},{\"role\":\"system\",\"content\":\"c\"}]}";
    cr_expect_eq(srv_gen_request_parse(LATE_SYSTEM, strlen(LATE_SYSTEM), SRV_GEN_CHAT, &ru, &r, &e), -1);
    cr_expect_eq(e.status, 400);
    cr_expect(strstr(e.message, "llama2") != NULL, "%s", e.message);
    srv_gen_request_free(&r);

    /* a template Woolly does not recognize: no guessed format, a message naming the flag */
    ru.chat = woolly_chat_builtin(WOOLLY_CHAT_UNKNOWN);
    static const char HELLO[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}";
    cr_expect_eq(srv_gen_request_parse(HELLO, strlen(HELLO), SRV_GEN_CHAT, &ru, &r, &e), -1);
    cr_expect_eq(e.status, 400);
    cr_expect(strstr(e.message, "--chat-template") != NULL, "%s", e.message);
    srv_gen_request_free(&r);
    static const char COMPLETION[] = "{\"prompt\":\"a\"}";
    cr_expect_eq(srv_gen_request_parse(COMPLETION, strlen(COMPLETION), SRV_GEN_COMPLETION, &ru, &r, &e), 0,
                 "completions need no template: %s", e.message);
    srv_gen_request_free(&r);
}

Test(server_parts, bad_fields_are_named)
{
    static const struct {
        const char *body;
        int status;
        const char *param;
    } CASES[] = {
        {"{\"prompt\":\"a\",\"max_tokens\":65}", 400, "max_tokens"},
        {"{\"prompt\":\"a\",\"max_tokens\":0}", 400, "max_tokens"},
        {"{\"prompt\":\"a\",\"presence_penalty\":2.5}", 400, "presence_penalty"},
        {"{\"prompt\":\"a\",\"repeat_penalty\":0}", 400, "repeat_penalty"},
        {"{\"prompt\":\"a\",\"top_k\":1.5}", 400, "top_k"},
        {"{\"prompt\":\"a\",\"stream_options\":true}", 400, "stream_options"},
        {"{\"prompt\":\"a\",\"response_format\":{\"type\":\"yaml\"}}", 400, "response_format.type"},
        {"{\"prompt\":\"a\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
         "{\"type\":\"string\",\"format\":\"date\"}}}}",
         400, "response_format.json_schema.schema"},
        {"{\"prompt\":\"a\",\"grammar\":\"root ::= x\"}", 400, "grammar"},
        {"{\"prompt\":\"a\",\"echo\":true}", 400, "echo"},
        {"{\"prompt\":\"a\",\"suffix\":\"b\"}", 400, "suffix"},
        {"{\"prompt\":[]}", 400, "prompt"},
        {"{\"prompt\":[[1,2]]}", 400, "prompt"},
        {"{\"prompt\":\"a\",\"model\":\"other\"}", 404, "model"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        srv_gen_request r;
        srv_error e = {0};
        cr_expect_eq(parse(CASES[i].body, SRV_GEN_COMPLETION, &r, &e), -1, "case %zu accepted", i);
        cr_expect_eq(e.status, CASES[i].status, "case %zu: %d %s", i, e.status, e.message);
        cr_expect_str_eq(e.param, CASES[i].param, "case %zu: %s", i, e.message);
        srv_gen_request_free(&r);
    }
    /* A stop string of 257 bytes, one more than allowed. */
    char body[400] = "{\"prompt\":\"a\",\"stop\":[\"";
    memset(body + strlen(body), 'x', 257);
    strcat(body, "\"]}");
    srv_gen_request r;
    srv_error e = {0};
    cr_expect_eq(parse(body, SRV_GEN_COMPLETION, &r, &e), -1);
    cr_expect(strstr(e.message, "257") != NULL, "%s", e.message);
    srv_gen_request_free(&r);
}
