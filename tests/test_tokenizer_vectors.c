/* The tokenizers against the reference vectors: every string of the shared vocabulary tests
 * (../shared/testdata/vocab, from the original Hugging Face tokenizers), the token ids of the model
 * references (refs/M.tokens.txt), and decode(encode(s)) == s on those strings and on random bytes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tokenizer.h"
#include "tokenizer_impl.h"
#include "unicode.h"

#define SEPARATOR "\n__ggml_vocab_test__\n"
#define N_STRINGS 46

static woolly_tokenizer *open_tok(const char *rel)
{
    woolly_error err = {{0}};
    woolly_tokenizer *t = woolly_tokenizer_open_file(tu_data(rel), &err);
    cr_assert(t != NULL, "%s: %s", rel, err.msg);
    return t;
}

/* Heap array of the ids of text (cr-fails on error). */
static int64_t encode(const woolly_tokenizer *t, const char *text, size_t len, bool bos, bool special,
                      int32_t **ids)
{
    woolly_tokenize_opts opts = {bos, false, special};
    woolly_error err = {{0}};
    int64_t n = woolly_tokenize(t, text, len, &opts, NULL, 0, &err);
    cr_assert(n >= 0, "tokenize: %s", err.msg);
    *ids = malloc((size_t)(n + 1) * sizeof **ids);
    cr_assert(*ids != NULL);
    cr_assert_eq(woolly_tokenize(t, text, len, &opts, *ids, n, &err), n);
    return n;
}

/* Heap string (NUL-terminated) of the decoded ids. */
static char *decode(const woolly_tokenizer *t, const int32_t *ids, size_t n, size_t *len)
{
    woolly_error err = {{0}};
    int64_t m = woolly_detokenize(t, ids, n, NULL, 0, &err);
    cr_assert(m >= 0, "detokenize: %s", err.msg);
    char *s = malloc((size_t)m + 1);
    cr_assert(s != NULL);
    cr_assert_eq(woolly_detokenize(t, ids, n, s, (size_t)m, &err), m);
    s[m] = 0;
    *len = (size_t)m;
    return s;
}

static void format_ids(char *buf, size_t cap, const int32_t *ids, int64_t n)
{
    size_t o = 0;
    buf[0] = 0;
    for (int64_t i = 0; i < n && o + 16 < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, " %d", ids[i]);
}

/* The test strings of vocab X (split in place) and the expected id lines. */
typedef struct vectors {
    char *inp, *out;
    char *str[N_STRINGS + 1];
    size_t len[N_STRINGS + 1];
    char *line[N_STRINGS + 1];
    int n_str, n_line;
} vectors;

static void load_vectors(const char *vocab, vectors *v)
{
    char rel[256];
    memset(v, 0, sizeof *v);
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.inp", vocab);
    size_t n;
    v->inp = tu_read_file(tu_data(rel), &n);
    for (char *p = v->inp, *end = v->inp + n; p < end;) {
        char *sep = strstr(p, SEPARATOR);
        cr_assert(sep != NULL, "%s: text after the last separator", rel);
        cr_assert(v->n_str < N_STRINGS + 1, "%s: more than %d strings", rel, N_STRINGS);
        *sep = 0;
        v->str[v->n_str] = p;
        v->len[v->n_str++] = (size_t)(sep - p);
        p = sep + strlen(SEPARATOR);
    }
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.out", vocab);
    v->out = tu_read_file(tu_data(rel), &n);
    for (char *p = v->out; *p && v->n_line < N_STRINGS + 1;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = 0;
        v->line[v->n_line++] = p;
        if (!nl)
            break;
        p = nl + 1;
    }
    cr_assert_eq(v->n_str, N_STRINGS, "%s strings in %s", vocab, rel);
    cr_assert_eq(v->n_line, N_STRINGS, "%d expected lines for %s", v->n_line, vocab);
}

/* Every string tokenizes (no BOS) to exactly its line of ids; every mismatch is reported on its own. */
static void check_vectors(const char *vocab)
{
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", vocab);
    woolly_tokenizer *t = open_tok(rel);
    vectors v;
    load_vectors(vocab, &v);
    int ok = 0;
    for (int i = 0; i < N_STRINGS; i++) {
        int32_t *want, *got;
        int n_want = tu_parse_ids(v.line[i], &want);
        int64_t n_got = encode(t, v.str[i], v.len[i], false, false, &got);
        bool same = n_got == n_want && memcmp(want, got, (size_t)n_want * sizeof *got) == 0;
        char gbuf[2048];
        format_ids(gbuf, sizeof gbuf, got, n_got);
        cr_expect(same, "%s string %d '%.80s':\n  expected%s\n  got     %s", vocab, i, v.str[i], v.line[i],
                  gbuf);
        ok += same;
        free(want);
        free(got);
    }
    cr_assert_eq(ok, N_STRINGS, "%s: %d of %d strings exact", vocab, ok, N_STRINGS);
    free(v.inp);
    free(v.out);
    woolly_tokenizer_close(t);
}

Test(vocab_vectors, llama_spm)
{
    check_vectors("llama-spm");
}

Test(vocab_vectors, gpt_2)
{
    check_vectors("gpt-2");
}

Test(vocab_vectors, starcoder)
{
    check_vectors("starcoder");
}

/* decode(encode(s)) == s. For SentencePiece the decoder drops the space the encoder prepends, so the
 * round trip is exact as well. */
static void check_roundtrip(const char *vocab)
{
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", vocab);
    woolly_tokenizer *t = open_tok(rel);
    vectors v;
    load_vectors(vocab, &v);
    for (int i = 0; i < N_STRINGS; i++) {
        for (int bos = 0; bos < 2; bos++) {
            int32_t *ids;
            int64_t n = encode(t, v.str[i], v.len[i], bos, false, &ids);
            size_t m;
            char *back = decode(t, ids, (size_t)n, &m);
            cr_expect(m == v.len[i] && memcmp(back, v.str[i], m) == 0,
                      "%s string %d (bos %d): '%.80s' came back as '%.80s'", vocab, i, bos, v.str[i], back);
            free(back);
            free(ids);
        }
    }
    free(v.inp);
    free(v.out);
    woolly_tokenizer_close(t);
}

Test(roundtrip, llama_spm)
{
    check_roundtrip("llama-spm");
}

Test(roundtrip, gpt_2)
{
    check_roundtrip("gpt-2");
}

Test(roundtrip, starcoder)
{
    check_roundtrip("starcoder");
}

/* Random bytes (mostly invalid UTF-8) always tokenize, and decode back to themselves, except bytes the
 * vocabulary cannot spell at all (StarCoder has no token for 0xC0, 0xC1, 0xF5..0xFF and a few more),
 * which a byte-level BPE drops. */
static void check_random_bytes(const char *vocab)
{
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", vocab);
    woolly_tokenizer *t = open_tok(rel);
    tu_rng rng = {0x5eed0001};
    unsigned char buf[300], want[300];
    for (int iter = 0; iter < 300; iter++) {
        size_t len = tu_rand_u64(&rng) % sizeof buf, n_want = 0;
        int mode = iter % 3; /* any byte; mostly ASCII; mostly high bytes */
        for (size_t i = 0; i < len; i++) {
            uint64_t r = tu_rand_u64(&rng);
            buf[i] = mode == 0   ? (unsigned char)r
                     : mode == 1 ? (unsigned char)(r % 97 + 10)
                                 : (unsigned char)(r | 0x80);
        }
        for (size_t i = 0; i < len; i++) {
            bool representable = true;
            if (t->model == WOOLLY_TOK_BPE) {
                char c[4];
                size_t k = woolly_utf8_encode(woolly_byte_to_char(buf[i]), c);
                representable = woolly_vocab_lookup(t, c, k) >= 0;
            }
            if (representable)
                want[n_want++] = buf[i];
        }
        int32_t *ids;
        int64_t n = encode(t, (const char *)buf, len, iter & 1, false, &ids);
        for (int64_t i = 0; i < n; i++)
            cr_assert(ids[i] >= 0 && ids[i] < woolly_tokenizer_n_vocab(t));
        size_t m;
        char *back = decode(t, ids, (size_t)n, &m);
        cr_assert(m == n_want && memcmp(back, want, m) == 0,
                  "%s: random string %d (%zu bytes) did not come back", vocab, iter, len);
        free(back);
        free(ids);
    }
    woolly_tokenizer_close(t);
}

Test(random_bytes, llama_spm)
{
    check_random_bytes("llama-spm");
}

Test(random_bytes, gpt_2)
{
    check_random_bytes("gpt-2");
}

Test(random_bytes, starcoder)
{
    check_random_bytes("starcoder");
}

/* The token ids of the model references, with BOS as each vocabulary asks. */
static void check_ref(const char *model, const char *text)
{
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s.gguf", model);
    woolly_tokenizer *t = open_tok(rel);
    snprintf(rel, sizeof rel, "refs/%s.tokens.txt", model);
    char *line = tu_read_file(tu_data(rel), NULL);
    int32_t *want, *got;
    int n_want = tu_parse_ids(line, &want);
    int64_t n_got = encode(t, text, strlen(text), woolly_tokenizer_adds_bos(t), false, &got);
    char gbuf[2048];
    format_ids(gbuf, sizeof gbuf, got, n_got);
    cr_assert(n_got == n_want && memcmp(want, got, (size_t)n_want * sizeof *got) == 0,
              "%s:\n  expected %s  got     %s", model, line, gbuf);
    free(want);
    free(got);
    free(line);
    woolly_tokenizer_close(t);
}

#define LLAMA_TEXT "The quick brown fox jumps over the lazy dog. Once upon a time, in a small village"

Test(refs, tiny_llama)
{
    check_ref("tiny-llama-q4_k_m", LLAMA_TEXT);
    check_ref("tiny-llama-q6_k", LLAMA_TEXT);
    check_ref("tiny-llama-q8_0", LLAMA_TEXT);
    check_ref("tiny-llama-f16", LLAMA_TEXT);
}

Test(refs, tiny_granite)
{
    /* "\\n" is a backslash and an n, as in the README; StarCoder's vocabulary adds no BOS. */
    check_ref("tiny-granite-q4_k_m",
              "def fibonacci(n):\\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)");
}

Test(refs, stories260k)
{
    check_ref("stories260K", "Once upon a time, there was a little girl named Lily");
}

/* stories260K's greedy text: its ids (BOS + the prompt's 4 tokens, as the README gives them) decode
 * back to the file, which keeps the leading space SentencePiece's piece-by-piece output has. */
Test(refs, stories260k_greedy_text)
{
    woolly_tokenizer *t = open_tok("models/stories260K.gguf");
    size_t len;
    char *text = tu_read_file(tu_data("refs/stories260K.greedy200.txt"), &len);
    cr_assert(len > 1 && text[0] == ' ');
    int32_t *ids;
    int64_t n = encode(t, text + 1, len - 1, true, false, &ids);
    const int32_t prompt[] = {1, 403, 407, 261, 378};
    cr_assert(n > 5);
    cr_assert_arr_eq(ids, prompt, sizeof prompt, "the greedy text does not start with the prompt's tokens");
    size_t m;
    char *back = decode(t, ids, (size_t)n, &m);
    cr_assert(m == len - 1 && memcmp(back, text + 1, m) == 0);
    free(back);
    free(ids);
    free(text);
    woolly_tokenizer_close(t);
}

/* The synthetic models of the new families: their refs' token ids (llama.cpp's) from the text the README
 * gives, through each file's own tokenizer: BPE 5000 with the qwen2 pre-tokenizer (refact for
 * granitemoe), SPM 4000 with BOS (Phi-3's with its markup tokens). */
#define SYNTH_TEXT                                                                                           \
    "The quick brown fox jumps over the lazy dog. Once upon a time, in a small village by the sea, there "   \
    "lived an old fisherman who told the children stories about the stars, the wind and the long winter "    \
    "nights, and they listened until the fire went out."

Test(refs, synthetic_families)
{
    const char *models[] = {"tiny-qwen2-f16",    "tiny-qwen3-f16",      "tiny-qwen3-q4_k_m",
                            "tiny-qwen3moe-f16", "tiny-granitemoe-f16", "tiny-gemma3-f16",
                            "tiny-phi3-f16",     "tiny-mixtral-f16"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        check_ref(models[i], SYNTH_TEXT);
}
