/* The pre-tokenizers on their own (how each published regex cuts digits, letters, CJK, punctuation,
 * spaces and newlines), DeepSeek LLM's through a small synthetic byte-level vocabulary written with the
 * GGUF writer, and the generated Unicode tables underneath. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "testutil.h"
#include "tokenizer.h"
#include "tokenizer_impl.h"
#include "tokenizer_pretok.h"
#include "unicode.h"

#define MAX_PIECES 32

/* Asserts that p cuts text into exactly the NULL-terminated list of pieces. */
static void expect_split(enum woolly_pretok p, const char *text, const char *const *want)
{
    uint32_t *b;
    woolly_error err = {{0}};
    int64_t n = woolly_pretok_split(p, text, strlen(text), &b, &err);
    cr_assert(n >= 0, "%s", err.msg);
    char got[1024] = "", exp[1024] = "";
    size_t o = 0;
    for (int64_t i = 0; i < n; i++)
        o += (size_t)snprintf(got + o, sizeof got - o, "[%.*s]", (int)(b[i + 1] - b[i]), text + b[i]);
    o = 0;
    int n_want = 0;
    for (; want[n_want]; n_want++)
        o += (size_t)snprintf(exp + o, sizeof exp - o, "[%s]", want[n_want]);
    cr_assert_eq(b[0], 0);
    cr_assert_eq(b[n], strlen(text));
    cr_assert_str_eq(got, exp, "%s pre-tokenizer on '%s':\n  expected %s\n  got      %s",
                     woolly_pretok_name(p), text, exp, got);
    cr_assert_eq(n, n_want);
    free(b);
}

#define SPLIT(p, text, ...) expect_split(p, text, (const char *const[]){__VA_ARGS__, NULL})

Test(pretok_gpt2, words_contractions_numbers)
{
    SPLIT(WOOLLY_PRETOK_GPT2, "Hello world", "Hello", " world");
    SPLIT(WOOLLY_PRETOK_GPT2, "Hello, world!", "Hello", ",", " world", "!");
    SPLIT(WOOLLY_PRETOK_GPT2, "I've 'RE we'll", "I", "'ve", " '", "RE", " we", "'ll");
    SPLIT(WOOLLY_PRETOK_GPT2, "abc123 4.5", "abc", "123", " 4", ".", "5");
    SPLIT(WOOLLY_PRETOK_GPT2, "caf\xC3\xA9 na\xC3\xAFve", "caf\xC3\xA9", " na\xC3\xAFve");
}

Test(pretok_gpt2, spaces)
{
    /* \s+(?!\S) leaves the last space of a run to the word after it. */
    SPLIT(WOOLLY_PRETOK_GPT2, "a   b", "a", "  ", " b");
    SPLIT(WOOLLY_PRETOK_GPT2, "a  \n b", "a", "  \n", " b");
    SPLIT(WOOLLY_PRETOK_GPT2, "x   ", "x", "   ");
    SPLIT(WOOLLY_PRETOK_GPT2, "  x", " ", " x");
    SPLIT(WOOLLY_PRETOK_GPT2, "\t\tx", "\t", "\t", "x");
    SPLIT(WOOLLY_PRETOK_GPT2, " ", " ");
    SPLIT(WOOLLY_PRETOK_GPT2, "\n", "\n");
    /* U+3000 (ideographic space) is \s but not the optional plain space. */
    SPLIT(WOOLLY_PRETOK_GPT2, "a\xE3\x80\x80 b", "a", "\xE3\x80\x80", " b");
}

Test(pretok_gpt2, invalid_utf8_is_other)
{
    SPLIT(WOOLLY_PRETOK_GPT2, "ab\xFF\xFE cd\xC3", "ab", "\xFF\xFE", " cd", "\xC3");
}

Test(pretok_gpt2, empty)
{
    uint32_t *b;
    woolly_error err = {{0}};
    cr_assert_eq(woolly_pretok_split(WOOLLY_PRETOK_GPT2, "", 0, &b, &err), 0);
    cr_assert_eq(b[0], 0);
    free(b);
}

Test(pretok_starcoder, digits_alone)
{
    SPLIT(WOOLLY_PRETOK_STARCODER, " 123", " ", "1", "2", "3");
    SPLIT(WOOLLY_PRETOK_STARCODER, "x1y22", "x", "1", "y", "2", "2");
    SPLIT(WOOLLY_PRETOK_STARCODER, "Hello world 3.5!", "Hello", " world", " ", "3", ".", "5", "!");
    /* Any \p{N}: a superscript two (No) too. */
    SPLIT(WOOLLY_PRETOK_STARCODER, "x\xC2\xB2", "x", "\xC2\xB2");
}

Test(pretok_deepseek, letters_and_spaces)
{
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, "Hello world", "Hello", " world");
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, "Hello, world!", "Hello", ",", " world", "!");
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, "a  b", "a", " ", " b");
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, "a \tb", "a", " ", "\tb");
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, "ab   ", "ab", "   ");
    /* Cyrillic is in the letter class. */
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, "\xD0\x9F\xD1\x80\xD0\xB8 \xD0\xBC\xD0\xB8\xD1\x80",
          "\xD0\x9F\xD1\x80\xD0\xB8", " \xD0\xBC\xD0\xB8\xD1\x80");
}

Test(pretok_deepseek, digits_one_by_one)
{
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, "abc 12345 x", "abc", " ", "1", "2", "3", "4", "5", " x");
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, "3.14", "3", ".", "1", "4");
}

Test(pretok_deepseek, newlines)
{
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, "a\n\nb", "a", "\n", "\n", "b");
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, "a \n", "a", " ", "\n");
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, "x\r\n  y", "x", "\r", "\n", " ", " y");
}

Test(pretok_deepseek, punctuation)
{
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, "Hi!!! ...ok", "Hi", "!!!", " ...", "ok");
    /* The punctuation class [!-/:-~...] also spans the ASCII letters, so a letter piece is split again
     * where a letter outside ASCII follows ASCII ones: " café" -> " caf", "é". */
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, " caf\xC3\xA9", " caf", "\xC3\xA9");
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, "\xC3\xA9t\xC3\xA9", "\xC3\xA9", "t", "\xC3\xA9");
}

Test(pretok_deepseek, cjk)
{
    /* 我是中国人abc */
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM,
          "\xE6\x88\x91\xE6\x98\xAF\xE4\xB8\xAD\xE5\x9B\xBD\xE4\xBA\xBA"
          "abc",
          "\xE6\x88\x91\xE6\x98\xAF\xE4\xB8\xAD\xE5\x9B\xBD\xE4\xBA\xBA", "abc");
    /* 你好 世界 */
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, "\xE4\xBD\xA0\xE5\xA5\xBD \xE4\xB8\x96\xE7\x95\x8C",
          "\xE4\xBD\xA0\xE5\xA5\xBD", " ", "\xE4\xB8\x96\xE7\x95\x8C");
    /* 你好，世界。: full-width comma and ideographic full stop are punctuation */
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM,
          "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xE3\x80\x82",
          "\xE4\xBD\xA0\xE5\xA5\xBD", "\xEF\xBC\x8C", "\xE4\xB8\x96\xE7\x95\x8C", "\xE3\x80\x82");
    /* Hangul, and an emoji that is in no class */
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM,
          "\xEC\x95\x88\xEB\x85\x95 a\xF0\x9F\x98\x80"
          "b",
          "\xEC\x95\x88\xEB\x85\x95", " a", "\xF0\x9F\x98\x80", "b");
}

Test(pretok_deepseek, ideographic_space)
{
    /* U+3000 is \s, in the punctuation class and in the range U+0800..U+9FA5 of the CJK split: the
     * letter split makes "　b" a piece, which the CJK split cuts again. */
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM,
          "a\xE3\x80\x80\xE3\x80\x80"
          "b",
          "a", "\xE3\x80\x80", "\xE3\x80\x80", "b");
    /* Curly quotes (U+2018..U+201F) are punctuation and also in that range. */
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_LLM, "\xE2\x80\x9CHi\xE2\x80\x9D", "\xE2\x80\x9C", "Hi", "\xE2\x80\x9D");
}

/* Llama 3: letters take one character before them (not a digit or line break), digits go in threes,
 * contractions in either case, a line break run ends at its last break. */
Test(pretok_llama3, cuts)
{
    SPLIT(WOOLLY_PRETOK_LLAMA3, "Hello world", "Hello", " world");
    SPLIT(WOOLLY_PRETOK_LLAMA3, "1234567 x", "123", "456", "7", " x");
    SPLIT(WOOLLY_PRETOK_LLAMA3, "I'M you'RE", "I", "'M", " you", "'RE");
    SPLIT(WOOLLY_PRETOK_LLAMA3, "_under .NET", "_under", " .", "NET");
    SPLIT(WOOLLY_PRETOK_LLAMA3, "a \n\n b", "a", " \n\n", " b");
    SPLIT(WOOLLY_PRETOK_LLAMA3, "x!!\n\ny", "x", "!!\n\n", "y");
    SPLIT(WOOLLY_PRETOK_QWEN2, "1234 ab", "1", "2", "3", "4", " ab");
}

/* Tekken and GPT-4o as llama.cpp runs them: a case change splits a word, but a letter outside ASCII
 * counts as both cases; '~' is punctuation-like for them too. */
Test(pretok_cased, cuts)
{
    SPLIT(WOOLLY_PRETOK_TEKKEN, "HTTPServer iPhone", "HTTPServer", " i", "Phone");
    SPLIT(WOOLLY_PRETOK_TEKKEN, "ABCdef ABC", "ABCdef", " ABC");
    SPLIT(WOOLLY_PRETOK_TEKKEN,
          " \xC3\x89"
          "COLE",
          " \xC3\x89", "COLE");
    SPLIT(WOOLLY_PRETOK_TEKKEN, "a/b//\n", "a", "/b", "//\n");
    SPLIT(WOOLLY_PRETOK_TEKKEN, "12", "1", "2");
    SPLIT(WOOLLY_PRETOK_GPT4O, "1234 McDonald's", "123", "4", " Mc", "Donald's");
}

/* DeepSeek V3: digit groups and CJK/kana are cut out first; then ASCII punctuation takes the ASCII
 * letters after it, and '~' matches nothing (llama.cpp's ASCII \p{S} lacks it), so it stands alone. */
Test(pretok_deepseek_v3, cuts)
{
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_V3, "abc12345", "abc", "123", "45");
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_V3, ".NET (x)", ".NET", " (", "x", ")");
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_V3, "~ ~~", "~", " ", "~~");
    SPLIT(WOOLLY_PRETOK_DEEPSEEK_V3,
          "\xE4\xBD\xA0\xE5\xA5\xBD"
          "ab",
          "\xE4\xBD\xA0\xE5\xA5\xBD", "ab");
}

Test(pretok, names)
{
    enum woolly_pretok p;
    cr_assert_eq(woolly_pretok_lookup("default", 7, &p), 0);
    cr_assert_eq(p, WOOLLY_PRETOK_GPT2);
    cr_assert_eq(woolly_pretok_lookup("gpt-2", 5, &p), 0);
    cr_assert_eq(p, WOOLLY_PRETOK_GPT2);
    cr_assert_eq(woolly_pretok_lookup("starcoder", 9, &p), 0);
    cr_assert_eq(p, WOOLLY_PRETOK_STARCODER);
    cr_assert_eq(woolly_pretok_lookup("deepseek-llm", 12, &p), 0);
    cr_assert_eq(p, WOOLLY_PRETOK_DEEPSEEK_LLM);
    cr_assert_eq(woolly_pretok_lookup("llama-bpe", 9, &p), 0);
    cr_assert_eq(p, WOOLLY_PRETOK_LLAMA3);
    cr_assert_eq(woolly_pretok_lookup("deepseek-r1-qwen", 16, &p), 0);
    cr_assert_eq(p, WOOLLY_PRETOK_QWEN2);
    cr_assert_eq(woolly_pretok_lookup("smollm", 6, &p), 0);
    cr_assert_eq(p, WOOLLY_PRETOK_STARCODER);
    cr_assert_eq(woolly_pretok_lookup("tekken", 6, &p), 0);
    cr_assert_eq(p, WOOLLY_PRETOK_TEKKEN);
    cr_assert_eq(woolly_pretok_lookup("gpt-4o", 6, &p), 0);
    cr_assert_eq(p, WOOLLY_PRETOK_GPT4O);
    cr_assert_eq(woolly_pretok_lookup("deepseek-v3", 11, &p), 0);
    cr_assert_eq(p, WOOLLY_PRETOK_DEEPSEEK_V3);
    cr_assert_eq(woolly_pretok_lookup("chameleon", 9, &p), -1);
    cr_assert_eq(woolly_pretok_lookup("gpt-2x", 6, &p), -1);
    cr_assert_eq(woolly_pretok_lookup("deepseek", 8, &p), -1);
}

/* A 100k-character run of one class must not be quadratic in any pre-tokenizer. */
Test(pretok, long_runs_are_linear)
{
    size_t n = 100000;
    char *s = malloc(n);
    cr_assert(s != NULL);
    const char fills[] = {'a', 'A', ' ', '1', '!', '~', '\n'};
    for (size_t f = 0; f < sizeof fills; f++) {
        memset(s, fills[f], n);
        for (int p = WOOLLY_PRETOK_GPT2; p <= WOOLLY_PRETOK_DEEPSEEK_V3; p++) {
            uint32_t *b;
            woolly_error err = {{0}};
            int64_t k = woolly_pretok_split((enum woolly_pretok)p, s, n, &b, &err);
            cr_assert(k > 0, "%s", err.msg);
            cr_assert_eq(b[k], n);
            free(b);
        }
    }
    free(s);
}

/* ---- DeepSeek LLM through a synthetic byte-level vocabulary ---- */

static const char *const EXTRA_TOKENS[] = {
    "he",
    "ll",
    "hell",
    "hello",
    "\xC4\xA0w",
    "or",
    "\xC4\xA0wor",
    "ld",
    "\xC4\xA0world",
    "12",
    "ca",
    "caf",
    "\xC3\x83\xC2\xA9",         /* é */
    "caf\xC3\x83\xC2\xA9",      /* café */
    "\xC3\xA4\xC2\xB8",         /* first two bytes of 中 */
    "\xC3\xA4\xC2\xB8\xC5\x83", /* 中 */
    "\xC4\x8A\xC4\x8A",         /* "\n\n" */
};
static const char *const MERGES[] = {
    "h e",
    "l l",
    "he ll",
    "hell o",
    "\xC4\xA0 w",
    "o r",
    "\xC4\xA0w or",
    "l d",
    "\xC4\xA0wor ld",
    "1 2",
    "c a",
    "ca f",
    "\xC3\x83 \xC2\xA9",
    "caf \xC3\x83\xC2\xA9",
    "\xC3\xA4 \xC2\xB8",
    "\xC3\xA4\xC2\xB8 \xC5\x83",
    "\xC4\x8A \xC4\x8A",
};
#define N_EXTRA (sizeof EXTRA_TOKENS / sizeof EXTRA_TOKENS[0])
#define N_MERGES (sizeof MERGES / sizeof MERGES[0])

/* Writes a vocabulary-only GGUF: the 256 byte characters (token b = byte b), the extra tokens, and
 * <|end|> as a control token; pre may be NULL (no tokenizer.ggml.pre key). */
static const char *write_vocab(const char *name, const char *pre)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s", tu_tmp_path(name));
    const char *toks[256 + N_EXTRA + 1];
    int32_t types[256 + N_EXTRA + 1];
    static char chars[256][4];
    for (int b = 0; b < 256; b++) {
        size_t k = woolly_utf8_encode(woolly_byte_to_char((unsigned char)b), chars[b]);
        chars[b][k] = 0;
        toks[b] = chars[b];
        types[b] = WOOLLY_TOKEN_NORMAL;
    }
    for (size_t i = 0; i < N_EXTRA; i++) {
        toks[256 + i] = EXTRA_TOKENS[i];
        types[256 + i] = WOOLLY_TOKEN_NORMAL;
    }
    toks[256 + N_EXTRA] = "<|end|>";
    types[256 + N_EXTRA] = WOOLLY_TOKEN_CONTROL;
    woolly_error err = {{0}};
    gguf_writer *w = gguf_writer_open(path, &err);
    cr_assert(w != NULL, "%s", err.msg);
    gguf_writer_set_str(w, "general.architecture", "llama");
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (pre)
        gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 256 + N_EXTRA + 1);
    gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, 256 + N_EXTRA + 1);
    gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", MERGES, N_MERGES);
    gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 256 + N_EXTRA);
    cr_assert_eq(gguf_writer_write_header(w, &err), 0, "%s", err.msg);
    cr_assert_eq(gguf_writer_close(w, &err), 0, "%s", err.msg);
    return path;
}

static int32_t extra(const char *tok)
{
    for (size_t i = 0; i < N_EXTRA; i++)
        if (!strcmp(EXTRA_TOKENS[i], tok))
            return (int32_t)(256 + i);
    cr_assert_fail("no extra token %s", tok);
    return -1;
}

static void expect_ids(const woolly_tokenizer *t, const char *text, const int32_t *want, size_t n_want)
{
    int32_t got[64];
    woolly_tokenize_opts opts = {false, false, false};
    woolly_error err = {{0}};
    int64_t n = woolly_tokenize(t, text, strlen(text), &opts, got, 64, &err);
    cr_assert(n >= 0, "%s", err.msg);
    char gbuf[512] = "";
    for (int64_t i = 0, o = 0; i < n && i < 64; i++)
        o += snprintf(gbuf + o, sizeof gbuf - (size_t)o, " %d", got[i]);
    cr_assert(n == (int64_t)n_want && memcmp(got, want, n_want * sizeof *want) == 0, "'%s': got%s", text,
              gbuf);
    char back[256];
    int64_t m = woolly_detokenize(t, got, (size_t)n, back, sizeof back, &err);
    cr_assert(m == (int64_t)strlen(text) && memcmp(back, text, (size_t)m) == 0, "'%s' decoded as '%.*s'",
              text, (int)m, back);
}

#define IDS(...) (const int32_t[]){__VA_ARGS__}, sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t)

static woolly_tokenizer *open_synthetic(const char *name, const char *pre)
{
    woolly_error err = {{0}};
    woolly_tokenizer *t = woolly_tokenizer_open_file(write_vocab(name, pre), &err);
    cr_assert(t != NULL, "%s", err.msg);
    return t;
}

Test(deepseek_vocab, merges_within_pieces_only)
{
    woolly_tokenizer *t = open_synthetic("ds.gguf", "deepseek-llm");
    expect_ids(t, "hello world", IDS(extra("hello"), extra("\xC4\xA0world")));
    /* Digits are pieces of their own: the merge "1 2" never applies. */
    expect_ids(t, "x12", IDS('x', '1', '2'));
    /* " café" is cut into " caf" + "é": no "café" token although the merges would make one. */
    expect_ids(t, "caf\xC3\xA9", IDS(extra("caf"), extra("\xC3\x83\xC2\xA9")));
    /* 中 is one CJK piece; "\n\n" is two pieces, so never the "\n\n" token. */
    expect_ids(t, "\xE4\xB8\xAD", IDS(extra("\xC3\xA4\xC2\xB8\xC5\x83")));
    expect_ids(t, "\n\n", IDS('\n', '\n'));
    woolly_tokenizer_close(t);
}

Test(deepseek_vocab, gpt2_pre_merges_across)
{
    /* The same vocabulary with GPT-2's pre-tokenizer (and with no tokenizer.ggml.pre, which means
     * default = GPT-2): the merges that DeepSeek's cuts prevent now apply. */
    const char *pres[] = {"gpt-2", NULL};
    for (int i = 0; i < 2; i++) {
        woolly_tokenizer *t = open_synthetic(i ? "nopre.gguf" : "gpt2.gguf", pres[i]);
        expect_ids(t, "x12", IDS('x', extra("12")));
        expect_ids(t, "caf\xC3\xA9", IDS(extra("caf\xC3\x83\xC2\xA9")));
        expect_ids(t, "\n\n", IDS(extra("\xC4\x8A\xC4\x8A")));
        woolly_tokenizer_close(t);
    }
}

Test(deepseek_vocab, special_token_only_when_asked)
{
    woolly_tokenizer *t = open_synthetic("ds2.gguf", "deepseek-llm");
    int32_t end = 256 + (int32_t)N_EXTRA;
    int32_t ids[32];
    woolly_tokenize_opts plain = {false, false, false}, special = {false, false, true};
    woolly_error err = {{0}};
    cr_assert_eq(woolly_tokenize(t, "a<|end|>", 8, &special, ids, 32, &err), 2);
    cr_assert_eq(ids[0], 'a');
    cr_assert_eq(ids[1], end);
    int64_t n = woolly_tokenize(t, "a<|end|>", 8, &plain, ids, 32, &err);
    cr_assert_gt(n, 2);
    for (int64_t i = 0; i < n; i++)
        cr_assert_neq(ids[i], end);
    cr_assert(woolly_tokenizer_is_eog(t, end));
    woolly_tokenizer_close(t);
}

Test(deepseek_vocab, unknown_pre_is_an_error)
{
    woolly_error err = {{0}};
    woolly_tokenizer *t = woolly_tokenizer_open_file(write_vocab("chameleon.gguf", "chameleon"), &err);
    cr_assert_null(t);
    cr_assert(strstr(err.msg, "'chameleon'") && strstr(err.msg, "pre-tokenizer"), "message: %s", err.msg);
}

/* ---- The generated Unicode tables ---- */

Test(unicode, classes)
{
    cr_assert_str_eq(woolly_unicode_version(), "14.0.0");
    struct {
        uint32_t cp;
        uint8_t flags;
    } cases[] = {
        {'A', UCD_LETTER},
        {'z', UCD_LETTER},
        {'5', UCD_NUMBER},
        {'!', UCD_PUNCT},
        {'+', UCD_SYMBOL},
        {' ', UCD_SEPARATOR | UCD_SPACE},
        {'\t', UCD_OTHER | UCD_SPACE},
        {'\n', UCD_OTHER | UCD_SPACE},
        {0x0B, UCD_OTHER | UCD_SPACE},
        {0x1C, UCD_OTHER}, /* a file separator: Python's isspace, but not \s */
        {0x85, UCD_OTHER | UCD_SPACE},
        {0xA0, UCD_SEPARATOR | UCD_SPACE},
        {0xB2, UCD_NUMBER},
        {0xE9, UCD_LETTER},
        {0x0301, UCD_MARK},
        {0x0E31, UCD_MARK},
        {0x180E, UCD_OTHER}, /* no longer a space since Unicode 6.3 */
        {0x200B, UCD_OTHER},
        {0x2028, UCD_SEPARATOR | UCD_SPACE},
        {0x3000, UCD_SEPARATOR | UCD_SPACE},
        {0x3002, UCD_PUNCT},
        {0x4E2D, UCD_LETTER},
        {0xAC00, UCD_LETTER},
        {0xFF10, UCD_NUMBER},
        {0xFFFF, UCD_OTHER},
        {0x1F600, UCD_SYMBOL},
        {0x1D7CE, UCD_NUMBER},
        {0x10FFFF, UCD_OTHER},
        {WOOLLY_CP_INVALID, UCD_OTHER},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_eq(woolly_ucd_flags(cases[i].cp), cases[i].flags, "U+%04X: flags 0x%02X, expected 0x%02X",
                     cases[i].cp, woolly_ucd_flags(cases[i].cp), cases[i].flags);
}

Test(unicode, one_class_per_code_point)
{
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        uint8_t f = woolly_ucd_flags(cp) & (uint8_t)~UCD_SPACE;
        cr_assert(f != 0 && (f & (f - 1)) == 0, "U+%04X has flags 0x%02X", cp, f);
    }
}

Test(unicode, utf8_decode)
{
    struct {
        const char *s;
        size_t len;
        uint32_t cp;
        size_t n;
    } cases[] = {
        {"A", 1, 'A', 1},
        {"\xC3\xA9", 2, 0xE9, 2},
        {"\xE4\xB8\xAD", 3, 0x4E2D, 3},
        {"\xF0\x9F\x98\x80", 4, 0x1F600, 4},
        {"\xC0\x80", 2, WOOLLY_CP_INVALID, 1},         /* overlong */
        {"\xE0\x80\x80", 3, WOOLLY_CP_INVALID, 1},     /* overlong */
        {"\xED\xA0\x80", 3, WOOLLY_CP_INVALID, 1},     /* surrogate */
        {"\xF4\x90\x80\x80", 4, WOOLLY_CP_INVALID, 1}, /* above U+10FFFF */
        {"\xE4\xB8", 2, WOOLLY_CP_INVALID, 1},         /* truncated */
        {"\xE4"
         "A",
         2, WOOLLY_CP_INVALID, 1},         /* bad continuation */
        {"\x80", 1, WOOLLY_CP_INVALID, 1}, /* stray continuation */
        {"\xFF", 1, WOOLLY_CP_INVALID, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n;
        uint32_t cp = woolly_utf8_decode(cases[i].s, cases[i].len, &n);
        cr_assert(cp == cases[i].cp && n == cases[i].n, "case %zu: U+%04X (%zu bytes)", i, cp, n);
        if (cp != WOOLLY_CP_INVALID) {
            char buf[4];
            cr_assert_eq(woolly_utf8_encode(cp, buf), n);
            cr_assert(memcmp(buf, cases[i].s, n) == 0);
        }
    }
}

Test(unicode, byte_level_mapping_is_a_bijection)
{
    bool seen[0x200] = {false};
    for (int b = 0; b < 256; b++) {
        uint32_t c = woolly_byte_to_char((unsigned char)b);
        cr_assert(c < 0x200 && !seen[c], "byte %d -> U+%04X", b, c);
        seen[c] = true;
        cr_assert_eq(woolly_char_to_byte(c), b);
        /* The printable bytes stand for themselves; the others are shifted past U+00FF. */
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        cr_assert_eq(c == (uint32_t)b, printable);
    }
    cr_assert_eq(woolly_byte_to_char(' '), 0x120);  /* Ġ */
    cr_assert_eq(woolly_byte_to_char('\n'), 0x10A); /* Ċ */
    cr_assert_eq(woolly_char_to_byte(0x20), -1);
    cr_assert_eq(woolly_char_to_byte(0x144), -1);
}

/* Any bytes (random ASCII, letters of both cases, digits, marks, CJK, spaces, '~', invalid UTF-8) are cut
 * by every pre-tokenizer into non-empty pieces that tile the text. */
Test(pretok, random_texts_are_tiled)
{
    static const char *const atoms[] = {"a",
                                        "Z",
                                        "1",
                                        " ",
                                        "  ",
                                        "\n",
                                        "\r\n",
                                        "~",
                                        "'s",
                                        "'LL",
                                        ".",
                                        "\xC3\xA9",
                                        "\xC3\x89",
                                        "\xCC\x81",
                                        "\xE4\xBD\xA0",
                                        "\xE3\x81\x82",
                                        "\xE3\x80\x80",
                                        "\xF0\x9F\xA6\x99",
                                        "\xFF",
                                        "\xC3",
                                        "\t",
                                        "\xC2\xB2"};
    const size_t n_atoms = sizeof atoms / sizeof atoms[0];
    tu_rng rng = {0x7e57c0de};
    char text[512];
    for (int iter = 0; iter < 2000; iter++) {
        size_t len = 0;
        for (int k = (int)(tu_rand_u64(&rng) % 40); k > 0; k--) {
            const char *a = atoms[tu_rand_u64(&rng) % n_atoms];
            memcpy(text + len, a, strlen(a));
            len += strlen(a);
        }
        for (int p = WOOLLY_PRETOK_GPT2; p <= WOOLLY_PRETOK_DEEPSEEK_V3; p++) {
            uint32_t *b;
            woolly_error err = {{0}};
            int64_t n = woolly_pretok_split((enum woolly_pretok)p, text, len, &b, &err);
            cr_assert(n >= 0, "%s", err.msg);
            cr_assert_eq(b[0], 0);
            cr_assert_eq(b[n], len);
            for (int64_t i = 0; i < n; i++)
                cr_assert_lt(b[i], b[i + 1], "%s: an empty piece", woolly_pretok_name((enum woolly_pretok)p));
            free(b);
        }
    }
}
