/* The tokenizer API around the algorithms: special tokens, BOS/EOS, the piece table, streaming
 * decode, capacities, long inputs, and the errors for malformed vocabularies. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "testutil.h"
#include "tokenizer.h"
#include "unicode.h"

#define SPM "vocab/ggml-vocab-llama-spm.gguf"
#define GPT2 "vocab/ggml-vocab-gpt-2.gguf"
#define STARCODER "vocab/ggml-vocab-starcoder.gguf"

static woolly_tokenizer *open_tok(const char *rel)
{
    woolly_error err = {{0}};
    woolly_tokenizer *t = woolly_tokenizer_open_file(tu_data(rel), &err);
    cr_assert(t != NULL, "%s: %s", rel, err.msg);
    return t;
}

static int64_t tok(const woolly_tokenizer *t, const char *text, bool bos, bool special, int32_t *ids,
                   int64_t cap)
{
    woolly_tokenize_opts opts = {bos, false, special};
    woolly_error err = {{0}};
    int64_t n = woolly_tokenize(t, text, strlen(text), &opts, ids, cap, &err);
    cr_assert(n >= 0, "'%s': %s", text, err.msg);
    return n;
}

static bool contains(const int32_t *ids, int64_t n, int32_t id)
{
    for (int64_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

Test(special, spm_control_tokens_only_when_asked)
{
    woolly_tokenizer *t = open_tok(SPM);
    int32_t ids[64];
    int64_t n = tok(t, "<s>Hello</s>", false, true, ids, 64);
    const int32_t want[] = {1, 15043, 2}; /* text after a special token gets the leading space again */
    cr_assert(n == 3 && memcmp(ids, want, sizeof want) == 0, "got %lld ids: %d %d %d", (long long)n, ids[0],
              ids[1], ids[2]);
    n = tok(t, "Hello<s>World", false, true, ids, 64);
    const int32_t want2[] = {15043, 1, 2787};
    cr_assert(n == 3 && memcmp(ids, want2, sizeof want2) == 0);
    n = tok(t, "<s>Hello</s>", false, false, ids, 64);
    cr_assert_gt(n, 3);
    cr_assert(!contains(ids, n, 1) && !contains(ids, n, 2));
    woolly_tokenizer_close(t);
}

Test(special, bpe_endoftext_only_when_asked)
{
    woolly_tokenizer *t = open_tok(GPT2);
    int32_t ids[64];
    int64_t n = tok(t, "a<|endoftext|>b", false, true, ids, 64);
    cr_assert_eq(n, 3);
    cr_assert_eq(ids[1], 50256);
    n = tok(t, "a<|endoftext|>b", false, false, ids, 64);
    cr_assert_gt(n, 3);
    cr_assert(!contains(ids, n, 50256));
    woolly_tokenizer_close(t);

    /* StarCoder: the longest special token at a position wins (<fim_prefix> vs <fim_pad>, ...). */
    t = open_tok(STARCODER);
    n = tok(t, "<fim_prefix>x<fim_suffix><fim_middle>", false, true, ids, 64);
    cr_assert_eq(n, 4);
    cr_assert_eq(ids[0], woolly_tokenizer_find(t, "<fim_prefix>"));
    cr_assert_eq(ids[2], woolly_tokenizer_find(t, "<fim_suffix>"));
    cr_assert_eq(ids[3], woolly_tokenizer_find(t, "<fim_middle>"));
    woolly_tokenizer_close(t);
}

Test(bos_eos, defaults_from_metadata)
{
    struct {
        const char *rel;
        bool adds_bos;
        int32_t bos, eos;
    } cases[] = {
        {SPM, true, 1, 2},
        {GPT2, false, 50256, 50256},
        {STARCODER, false, 0, 0},
        {"models/stories260K.gguf", true, 1, 2}, /* no add_bos_token key: a llama vocabulary adds BOS */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        woolly_tokenizer *t = open_tok(cases[i].rel);
        cr_assert_eq(woolly_tokenizer_adds_bos(t), cases[i].adds_bos, "%s", cases[i].rel);
        cr_assert_eq(woolly_tokenizer_adds_eos(t), false, "%s", cases[i].rel);
        cr_assert_eq(woolly_tokenizer_bos(t), cases[i].bos, "%s", cases[i].rel);
        cr_assert_eq(woolly_tokenizer_eos(t), cases[i].eos, "%s", cases[i].rel);
        cr_assert(woolly_tokenizer_is_eog(t, cases[i].eos));
        cr_assert(!woolly_tokenizer_is_eog(t, 300));
        cr_assert(!woolly_tokenizer_is_eog(t, -1));
        cr_assert(!woolly_tokenizer_is_eog(t, woolly_tokenizer_n_vocab(t)));

        /* opts NULL: the vocabulary's defaults. */
        int32_t ids[16];
        woolly_error err = {{0}};
        int64_t n = woolly_tokenize(t, "Hi", 2, NULL, ids, 16, &err);
        cr_assert_gt(n, 0, "%s", err.msg);
        cr_assert_eq(ids[0] == cases[i].bos, cases[i].adds_bos, "%s", cases[i].rel);
        woolly_tokenizer_close(t);
    }
}

Test(bos_eos, empty_text_and_eos)
{
    woolly_tokenizer *t = open_tok(SPM);
    int32_t ids[4];
    cr_assert_eq(tok(t, "", false, false, ids, 4), 0);
    cr_assert_eq(tok(t, "", true, false, ids, 4), 1);
    cr_assert_eq(ids[0], 1);
    woolly_tokenize_opts opts = {true, true, false};
    woolly_error err = {{0}};
    cr_assert_eq(woolly_tokenize(t, "Hello", 5, &opts, ids, 4, &err), 3);
    cr_assert(ids[0] == 1 && ids[1] == 15043 && ids[2] == 2);
    woolly_tokenizer_close(t);
}

Test(capacity, count_beyond_cap)
{
    woolly_tokenizer *t = open_tok(SPM);
    int32_t ids[8] = {-7, -7, -7, -7, -7, -7, -7, -7};
    int64_t n = tok(t, "Hello world, how are you today?", false, false, ids, 2);
    cr_assert_gt(n, 2);
    cr_assert_eq(ids[0], 15043);
    cr_assert_eq(ids[2], -7, "wrote past cap");
    cr_assert_eq(tok(t, "Hello world, how are you today?", false, false, NULL, 0), n);
    woolly_tokenizer_close(t);
}

Test(pieces, lookup_and_bytes)
{
    woolly_tokenizer *t = open_tok(SPM);
    cr_assert_eq(woolly_tokenizer_n_vocab(t), 32000);
    cr_assert_str_eq(woolly_tokenizer_piece(t, 15043), "\xE2\x96\x81Hello");
    cr_assert_eq(woolly_tokenizer_find(t, "\xE2\x96\x81Hello"), 15043);
    cr_assert_eq(woolly_tokenizer_find(t, "no-such-piece-here"), -1);
    cr_assert_null(woolly_tokenizer_piece(t, -1));
    cr_assert_null(woolly_tokenizer_piece(t, 32000));
    char buf[64];
    cr_assert_eq(woolly_token_bytes(t, 15043, buf, sizeof buf), 6);
    cr_assert(memcmp(buf, " Hello", 6) == 0);
    cr_assert_eq(woolly_token_bytes(t, 13, buf, sizeof buf), 1); /* <0x0A> */
    cr_assert_eq(buf[0], '\n');
    cr_assert_eq(woolly_token_bytes(t, 1, buf, sizeof buf), 0); /* <s>: control */
    cr_assert_eq(woolly_token_bytes(t, 32000, buf, sizeof buf), -1);
    cr_assert_geq(woolly_tokenizer_max_token_bytes(t), 6);
    woolly_tokenizer_close(t);

    t = open_tok(GPT2);
    int32_t id = woolly_tokenizer_find(t, "\xC4\xA0world"); /* Ġworld */
    cr_assert_geq(id, 0);
    cr_assert_eq(woolly_token_bytes(t, id, buf, sizeof buf), 6);
    cr_assert(memcmp(buf, " world", 6) == 0);
    cr_assert_eq(woolly_token_bytes(t, 50256, buf, sizeof buf), 0);
    woolly_tokenizer_close(t);
}

/* Every chunk the stream returns is whole UTF-8 characters, and together they are the text. */
static void check_stream(const char *rel, const char *text, bool bos)
{
    woolly_tokenizer *t = open_tok(rel);
    int32_t ids[256];
    int64_t n = tok(t, text, bos, false, ids, 256);
    cr_assert_leq(n, 256);
    woolly_detok_stream s;
    woolly_detok_stream_init(&s, t);
    size_t cap = 64 + woolly_tokenizer_max_token_bytes(t), total = 0;
    char *chunk = malloc(cap), joined[1024];
    cr_assert(chunk != NULL);
    bool saw_partial_token = false;
    for (int64_t i = 0; i < n; i++) {
        int64_t m = woolly_detok_stream_feed(&s, ids[i], chunk, cap);
        cr_assert(m >= 0);
        char tb[64];
        int64_t tl = woolly_token_bytes(t, ids[i], tb, sizeof tb);
        saw_partial_token |= tl > 0 && m == 0;
        for (size_t k = 0; k < (size_t)m;) {
            size_t len;
            cr_assert_neq(woolly_utf8_decode(chunk + k, (size_t)m - k, &len), WOOLLY_CP_INVALID,
                          "%s: chunk %lld splits a character", rel, (long long)i);
            k += len;
        }
        cr_assert_lt(total + (size_t)m, sizeof joined);
        memcpy(joined + total, chunk, (size_t)m);
        total += (size_t)m;
    }
    int64_t m = woolly_detok_stream_flush(&s, chunk, cap);
    cr_assert_eq(m, 0);
    cr_assert(saw_partial_token, "%s: no token held back: the text does not exercise the stream", rel);
    cr_assert(total == strlen(text) && memcmp(joined, text, total) == 0, "%s: streamed '%.*s'", rel,
              (int)total, joined);
    cr_assert_eq(woolly_detok_stream_feed(&s, -1, chunk, cap), -1);
    free(chunk);
    woolly_tokenizer_close(t);
}

#define STREAM_TEXT "Hi \xF0\x9F\xA6\x99 llamas, \xE4\xB8\xAD\xE6\x96\x87 and \xC3\xA9t\xC3\xA9 \xE1\x9E\x80!"

Test(stream, never_splits_characters)
{
    check_stream(SPM, STREAM_TEXT, true);
    check_stream(GPT2, STREAM_TEXT, false);
    check_stream(STARCODER, STREAM_TEXT, false);
}

Test(stream, flush_returns_an_unfinished_character)
{
    woolly_tokenizer *t = open_tok(GPT2);
    int32_t ids[8];
    int64_t n = tok(t, "a\xE4\xB8", false, false, ids, 8); /* ends inside a character */
    woolly_detok_stream s;
    woolly_detok_stream_init(&s, t);
    char out[256];
    size_t got = 0;
    for (int64_t i = 0; i < n; i++)
        got += (size_t)woolly_detok_stream_feed(&s, ids[i], out + got, sizeof out - got);
    cr_assert_eq(got, 1);
    cr_assert_eq(woolly_detok_stream_flush(&s, out + got, sizeof out - got), 2);
    cr_assert(memcmp(out, "a\xE4\xB8", 3) == 0);
    woolly_tokenizer_close(t);
}

Test(decode, spm_leading_space_rule)
{
    woolly_tokenizer *t = open_tok(SPM);
    char out[64];
    woolly_error err = {{0}};
    /* <s> ▁Hello ▁world: the first text token loses its space; control tokens are empty. */
    const int32_t ids[] = {1, 15043, 3186};
    int64_t n = woolly_detokenize(t, ids, 3, out, sizeof out, &err);
    cr_assert(n == 11 && memcmp(out, "Hello world", 11) == 0);
    /* A GPT-2 vocabulary keeps every space. */
    woolly_tokenizer_close(t);
    t = open_tok(GPT2);
    const int32_t ids2[] = {995, 995}; /* Ġworld */
    n = woolly_detokenize(t, ids2, 2, out, sizeof out, &err);
    cr_assert(n == 12 && memcmp(out, " world world", 12) == 0, "%.*s", (int)n, out);
    const int32_t bad[] = {995, 50257};
    cr_assert_eq(woolly_detokenize(t, bad, 2, out, sizeof out, &err), -1);
    cr_assert(strstr(err.msg, "50257") && strstr(err.msg, "50257 tokens"), "message: %s", err.msg);
    woolly_tokenizer_close(t);
}

/* Long runs of one character: the merges must stay near-linear (a quadratic BPE would take minutes
 * here), and the result must still decode back. */
Test(long_input, runs_of_one_character)
{
    const char *vocabs[] = {SPM, STARCODER};
    size_t n = 100000;
    char *s = malloc(n + 1);
    cr_assert(s != NULL);
    const char fills[] = {'a', ' ', '7', '\n'};
    for (size_t v = 0; v < 2; v++) {
        woolly_tokenizer *t = open_tok(vocabs[v]);
        for (size_t f = 0; f < sizeof fills; f++) {
            memset(s, fills[f], n);
            s[n] = 0;
            woolly_tokenize_opts opts = {false, false, false};
            woolly_error err = {{0}};
            int64_t k = woolly_tokenize(t, s, n, &opts, NULL, 0, &err);
            cr_assert_gt(k, 0, "%s", err.msg);
            int32_t *ids = malloc((size_t)k * sizeof *ids);
            cr_assert(ids != NULL);
            cr_assert_eq(woolly_tokenize(t, s, n, &opts, ids, k, &err), k);
            char *back = malloc(n + 16);
            cr_assert(back != NULL);
            cr_assert_eq(woolly_detokenize(t, ids, (size_t)k, back, n + 16, &err), (int64_t)n);
            cr_assert(memcmp(back, s, n) == 0, "%s: run of '%c' did not come back", vocabs[v], fills[f]);
            free(back);
            free(ids);
        }
        woolly_tokenizer_close(t);
    }
    free(s);
}

/* ---- Malformed vocabularies ---- */

typedef enum broken { NO_TOKENIZER, BAD_MODEL, SHORT_TYPES, BAD_MERGE, NO_MERGES, TOKENS_NOT_STRINGS } broken;

static char *open_broken(broken b)
{
    const char *path = tu_tmp_path("broken.gguf");
    woolly_error err = {{0}};
    gguf_writer *w = gguf_writer_open(path, &err);
    cr_assert(w != NULL, "%s", err.msg);
    const char *toks[] = {"a", "b", "ab"};
    const int32_t types[] = {1, 1};
    const char *merges[] = {b == BAD_MERGE ? "a c" : "a b"};
    gguf_writer_set_str(w, "general.architecture", "llama");
    if (b != NO_TOKENIZER)
        gguf_writer_set_str(w, "tokenizer.ggml.model", b == BAD_MODEL ? "bert" : "gpt2");
    if (b == TOKENS_NOT_STRINGS)
        gguf_writer_set_arr_i32(w, "tokenizer.ggml.tokens", types, 2);
    else
        gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    if (b == SHORT_TYPES)
        gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, 2);
    if (b != NO_MERGES)
        gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    cr_assert_eq(gguf_writer_write_header(w, &err), 0, "%s", err.msg);
    cr_assert_eq(gguf_writer_close(w, &err), 0, "%s", err.msg);
    woolly_tokenizer *t = woolly_tokenizer_open_file(path, &err);
    cr_assert_null(t, "case %d opened", (int)b);
    cr_assert(strstr(err.msg, path), "the message does not name the file: %s", err.msg);
    return strdup(err.msg);
}

Test(malformed, clear_errors)
{
    struct {
        broken b;
        const char *needle;
    } cases[] = {
        {NO_TOKENIZER, "tokenizer.ggml.model"},
        {BAD_MODEL, "'bert'"},
        {SHORT_TYPES, "2 entries"},
        {BAD_MERGE, "'a c'"},
        {NO_MERGES, "tokenizer.ggml.merges"},
        {TOKENS_NOT_STRINGS, "tokenizer.ggml.tokens"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *msg = open_broken(cases[i].b);
        cr_assert(strstr(msg, cases[i].needle), "case %zu: '%s' does not mention %s", i, msg,
                  cases[i].needle);
        free(msg);
    }
    woolly_error err = {{0}};
    cr_assert_null(woolly_tokenizer_open_file("/nonexistent/vocab.gguf", &err));
    cr_assert(strstr(err.msg, "/nonexistent/vocab.gguf"), "%s", err.msg);
}

Test(malformed, a_good_minimal_vocab_opens)
{
    /* The fixture itself is sound: with nothing broken it tokenizes "ab" to the merged token. */
    const char *path = tu_tmp_path("ok.gguf");
    woolly_error err = {{0}};
    gguf_writer *w = gguf_writer_open(path, &err);
    cr_assert(w != NULL);
    const char *toks[] = {"a", "b", "ab"};
    const char *merges[] = {"a b"};
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    cr_assert_eq(gguf_writer_write_header(w, &err), 0);
    cr_assert_eq(gguf_writer_close(w, &err), 0);
    woolly_tokenizer *t = woolly_tokenizer_open_file(path, &err);
    cr_assert(t != NULL, "%s", err.msg);
    int32_t ids[4];
    cr_assert_eq(tok(t, "abab", false, false, ids, 4), 2);
    cr_assert(ids[0] == 2 && ids[1] == 2);
    /* "c" is a byte this vocabulary cannot spell and it has no unknown token: it is left out before
     * merging, so "a" and "b" still merge. */
    cr_assert_eq(tok(t, "acb", false, false, ids, 4), 1);
    cr_assert_eq(ids[0], 2);
    woolly_tokenizer_close(t);
}

/* ---- A synthetic SentencePiece vocabulary: merge order by score, unknown characters ---- */

static woolly_tokenizer *open_spm(float score_ab, float score_bc, bool byte_tokens)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", tu_tmp_path("spm.gguf"));
    /* ids: 0 <unk>, 1 <s>, 2 </s>, 3 ▁, 4 a, 5 b, 6 c, 7 ab, 8 bc, 9 ▁a, then <0x00>.. <0xFF> */
    const char *toks[10 + 256] = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b"};
    float scores[10 + 256] = {0, 0, 0, -10, -20, -20};
    int32_t types[10 + 256] = {2, 3, 3, 1, 1, 1};
    const char *more[] = {"c", "ab", "bc",
                          "\xE2\x96\x81"
                          "a"};
    const float more_scores[] = {-20, score_ab, score_bc, -30};
    static char names[256][8];
    size_t n = 6;
    for (size_t i = 0; i < 4; i++, n++) {
        toks[n] = more[i];
        scores[n] = more_scores[i];
        types[n] = 1;
    }
    for (int b = 0; byte_tokens && b < 256; b++, n++) {
        snprintf(names[b], sizeof names[b], "<0x%02X>", b);
        toks[n] = names[b];
        scores[n] = 0;
        types[n] = 6;
    }
    woolly_error err = {{0}};
    gguf_writer *w = gguf_writer_open(path, &err);
    cr_assert(w != NULL, "%s", err.msg);
    gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, n);
    gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", scores, n);
    gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, n);
    cr_assert_eq(gguf_writer_write_header(w, &err), 0, "%s", err.msg);
    cr_assert_eq(gguf_writer_close(w, &err), 0, "%s", err.msg);
    woolly_tokenizer *t = woolly_tokenizer_open_file(path, &err);
    cr_assert(t != NULL, "%s", err.msg);
    return t;
}

static void expect_spm(const woolly_tokenizer *t, const char *text, const int32_t *want, int64_t n_want)
{
    int32_t ids[32];
    int64_t n = tok(t, text, false, false, ids, 32);
    char got[256] = "";
    for (int64_t i = 0, o = 0; i < n && i < 32; i++)
        o += snprintf(got + o, sizeof got - (size_t)o, " %d", ids[i]);
    cr_assert(n == n_want && memcmp(ids, want, (size_t)n * sizeof *ids) == 0, "'%s': got%s", text, got);
}

#define SPM_IDS(...) (const int32_t[]){__VA_ARGS__}, sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t)

Test(spm_synthetic, merges_by_score_then_leftmost)
{
    woolly_tokenizer *t = open_spm(-1.0f, -0.5f, true);
    cr_assert(woolly_tokenizer_adds_bos(t)); /* a llama vocabulary without the key */
    expect_spm(t, "abc", SPM_IDS(9, 8));     /* "bc" scores higher than "ab", then "▁a" */
    woolly_tokenizer_close(t);
    t = open_spm(-1.0f, -1.0f, true);
    expect_spm(t, "abc", SPM_IDS(3, 7, 6)); /* equal scores: the leftmost pair first */
    expect_spm(t, "a", SPM_IDS(9));         /* "▁a" */
    woolly_tokenizer_close(t);
}

Test(spm_synthetic, unknown_characters)
{
    /* "€" is not in the vocabulary: its three bytes with byte tokens, else the unknown token. */
    woolly_tokenizer *t = open_spm(-1.0f, -0.5f, true);
    int32_t e0 = woolly_tokenizer_find(t, "<0xE2>"), e1 = woolly_tokenizer_find(t, "<0x82>"),
            e2 = woolly_tokenizer_find(t, "<0xAC>");
    expect_spm(t,
               "a\xE2\x82\xAC"
               "b",
               SPM_IDS(9, e0, e1, e2, 5));
    woolly_tokenizer_close(t);
    t = open_spm(-1.0f, -0.5f, false);
    expect_spm(t,
               "a\xE2\x82\xAC"
               "b",
               SPM_IDS(9, 0, 5));
    expect_spm(t, "a\xFF", SPM_IDS(9, 0)); /* invalid UTF-8 too */
    woolly_tokenizer_close(t);
}
