/* The sampler under a grammar, on stories260K's vocabulary with random logits (a random-weight model's
 * case: nothing pushes it towards JSON): every sampled output, under many seeds, is a whole sentence of
 * the grammar (JSON that jansson parses, with the schema's shape), ends with an end-of-generation token,
 * and a grammar no token can continue ends the output at once. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "woolly.h"

#define MAX_STEPS 4000

static woolly_model *model;

static void open_model(void)
{
    model = woolly_model_open(tu_data("models/stories260K.gguf"));
    cr_assert(model, "%s", woolly_last_error());
}

static void close_model(void)
{
    woolly_model_close(model);
}

/* Samples with g from random logits until an end-of-generation token; the text goes to out. Returns the
 * number of tokens, or -1 if MAX_STEPS passed without an end. */
static int generate(const woolly_grammar *g, uint64_t seed, char *out, size_t cap)
{
    const int32_t n_vocab = woolly_model_n_vocab(model);
    woolly_sampler_params p = woolly_sampler_default_params();
    p.seed = seed;
    p.temp = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    woolly_sampler *s = woolly_sampler_open(model, &p);
    cr_assert(s);
    cr_assert_eq(woolly_sampler_set_grammar(s, model, g), 0, "%s", woolly_last_error());
    float *logits = malloc(sizeof *logits * (size_t)n_vocab);
    woolly_token *ids = malloc(sizeof *ids * MAX_STEPS);
    tu_rng rng = {seed * 7919 + 1};
    int n = 0, ended = 0;
    while (n < MAX_STEPS) {
        for (int32_t i = 0; i < n_vocab; i++)
            logits[i] = 3.0f * tu_rand_normal(&rng);
        const woolly_token t = woolly_sampler_sample(s, logits);
        woolly_sampler_accept(s, t);
        if (woolly_token_is_eog(model, t)) {
            ended = 1;
            break;
        }
        ids[n++] = t;
    }
    const int64_t len = woolly_model_detokenize(model, ids, n, out, cap);
    cr_assert(len >= 0 && (size_t)len < cap, "output too long: %lld", (long long)len);
    free(ids);
    free(logits);
    woolly_sampler_close(s);
    return ended ? n : -1;
}

TestSuite(grammar_sampler, .init = open_model, .fini = close_model);

Test(grammar_sampler, json_object_outputs_parse)
{
    woolly_grammar *g = woolly_grammar_open_json_schema("{\"type\":\"object\"}", 17);
    cr_assert(g, "%s", woolly_last_error());
    static char text[1 << 16];
    for (uint64_t seed = 1; seed <= 16; seed++) {
        cr_assert(generate(g, seed, text, sizeof text) >= 0, "seed %llu: no end in %d tokens", (unsigned long long)seed,
                  MAX_STEPS);
        json_error_t e;
        json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
        cr_assert(v && json_is_object(v), "seed %llu: not a JSON object (%s): %s", (unsigned long long)seed, e.text, text);
        json_decref(v);
    }
    woolly_grammar_close(g);
}

Test(grammar_sampler, schema_outputs_have_its_shape)
{
    const char *sch = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                      "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]},"
                      "\"maxItems\":3},\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\",\"tags\"],"
                      "\"additionalProperties\":false}";
    woolly_grammar *g = woolly_grammar_open_json_schema(sch, strlen(sch));
    cr_assert(g, "%s", woolly_last_error());
    static char text[1 << 16];
    for (uint64_t seed = 1; seed <= 16; seed++) {
        cr_assert(generate(g, seed, text, sizeof text) >= 0, "seed %llu: no end", (unsigned long long)seed);
        json_error_t e;
        json_t *v = json_loads(text, 0, &e);
        cr_assert(v, "seed %llu: not JSON (%s): %s", (unsigned long long)seed, e.text, text);
        cr_expect(json_is_string(json_object_get(v, "name")), "%s", text);
        cr_expect(json_is_integer(json_object_get(v, "age")), "%s", text);
        json_t *tags = json_object_get(v, "tags");
        cr_expect(json_is_array(tags) && json_array_size(tags) <= 3, "%s", text);
        size_t i;
        json_t *tag;
        json_array_foreach(tags, i, tag)
        {
            cr_expect(json_is_string(tag) && (!strcmp(json_string_value(tag), "a") || !strcmp(json_string_value(tag), "b")),
                      "%s", text);
        }
        json_t *ok = json_object_get(v, "ok");
        cr_expect(!ok || json_is_boolean(ok), "%s", text);
        cr_expect(json_object_size(v) == 3 + (ok != NULL), "%s", text);
        json_decref(v);
    }
    woolly_grammar_close(g);
}

Test(grammar_sampler, gbnf_outputs_match)
{
    const char *gbnf = "root ::= (\"yes\" | \"no\") \" \" [0-9]+ \"!\"";
    woolly_grammar *g = woolly_grammar_open_gbnf(gbnf, strlen(gbnf));
    cr_assert(g, "%s", woolly_last_error());
    char text[1 << 14];
    for (uint64_t seed = 1; seed <= 16; seed++) {
        cr_assert(generate(g, seed, text, sizeof text) >= 0);
        const char *p = !strncmp(text, "yes ", 4) ? text + 4 : !strncmp(text, "no ", 3) ? text + 3 : NULL;
        cr_assert(p, "%s", text);
        size_t digits = strspn(p, "0123456789");
        cr_expect(digits > 0 && !strcmp(p + digits, "!"), "%s", text);
    }
    woolly_grammar_close(g);
}

Test(grammar_sampler, nothing_allowed_ends_at_once)
{
    /* After "x" the grammar wants a character of an empty class: no token can follow (byte tokens spell
     * any character, so only an empty class leaves a byte-fallback vocabulary nothing). */
    const char *gbnf = "root ::= \"x\" []";
    woolly_grammar *g = woolly_grammar_open_gbnf(gbnf, strlen(gbnf));
    cr_assert(g);
    char text[64];
    cr_expect_eq(generate(g, 1, text, sizeof text), 1);
    cr_expect_str_eq(text, "x");
    woolly_grammar_close(g);
}

Test(grammar_sampler, greedy_stays_in_the_language)
{
    const char *gbnf = "root ::= \"a\" | \"b\"";
    woolly_grammar *g = woolly_grammar_open_gbnf(gbnf, strlen(gbnf));
    cr_assert(g);
    woolly_sampler_params p = woolly_sampler_default_params();
    p.temp = 0.0f;
    woolly_sampler *s = woolly_sampler_open(model, &p);
    cr_assert_eq(woolly_sampler_set_grammar(s, model, g), 0);
    const int32_t n_vocab = woolly_model_n_vocab(model);
    float *logits = malloc(sizeof *logits * (size_t)n_vocab);
    for (int32_t i = 0; i < n_vocab; i++)
        logits[i] = (float)i; /* the most likely tokens are the last ids, whatever they spell */
    const woolly_token t = woolly_sampler_sample(s, logits);
    woolly_sampler_accept(s, t);
    char piece[16] = {0};
    woolly_model_detokenize(model, &t, 1, piece, sizeof piece);
    cr_expect(!strcmp(piece, "a") || !strcmp(piece, "b"), "picked '%s'", piece);
    cr_expect(woolly_token_is_eog(model, woolly_sampler_sample(s, logits)), "then only the end is allowed");
    cr_expect_null(woolly_sampler_grammar_error(s), "an output the grammar ended is not a failure");
    woolly_sampler_close(s);
    free(logits);
    woolly_grammar_close(g);
}

/* A grammar too ambiguous to follow (each letter may open up to 24 more roots, so the ways to parse a
 * run of letters grow exponentially) ends the output as soon as the matcher gives up, and the sampler
 * says why, for the caller to report rather than pass the cut output off as whole. */
Test(grammar_sampler, a_grammar_that_fails_says_why)
{
    const char *gbnf = "root ::= [a-z] root{,24}";
    woolly_grammar *g = woolly_grammar_open_gbnf(gbnf, strlen(gbnf));
    cr_assert(g, "%s", woolly_last_error());
    woolly_sampler_params p = woolly_sampler_default_params();
    p.seed = 7;
    woolly_sampler *s = woolly_sampler_open(model, &p);
    cr_assert_eq(woolly_sampler_set_grammar(s, model, g), 0, "%s", woolly_last_error());
    cr_expect_null(woolly_sampler_grammar_error(s));
    const int32_t n_vocab = woolly_model_n_vocab(model);
    float *logits = malloc(sizeof *logits * (size_t)n_vocab);
    tu_rng rng = {99};
    int steps = 0;
    for (; steps < 200 && !woolly_sampler_grammar_done(s); steps++) {
        for (int32_t i = 0; i < n_vocab; i++) /* the end never chosen while letters are allowed */
            logits[i] = woolly_token_is_eog(model, i) ? -1e30f : 3.0f * tu_rand_normal(&rng);
        woolly_sampler_accept(s, woolly_sampler_sample(s, logits));
    }
    cr_assert(woolly_sampler_grammar_done(s), "200 tokens of an exponentially ambiguous grammar followed");
    const char *why = woolly_sampler_grammar_error(s);
    cr_expect(why && strstr(why, "ways to go on"), "after %d tokens: %s", steps, why ? why : "(no reason)");
    free(logits);
    woolly_sampler_close(s);
    woolly_grammar_close(g);
}
