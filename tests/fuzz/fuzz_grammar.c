/* libFuzzer target for constrained decoding (runtime/grammar): the server compiles the GBNF text and JSON
 * Schemas its clients send (`grammar`, `response_format`, tool parameters), so every input must compile
 * or be refused with a message, in bounded time and memory. An input is one byte that says which (even:
 * GBNF, odd: JSON Schema), the grammar's text, and optionally a NUL byte and text to feed the matcher.
 * Beyond not crashing, what it checks on every grammar that compiles:
 *   - a schema's GBNF (woolly_json_schema_to_gbnf) parses as GBNF;
 *   - at every step of the fed text, the allowed-token mask of a small vocabulary agrees token by token
 *     with woolly_gmatch_allows, and woolly_gmatch_accept moves exactly when allows said it would, until
 *     the matcher fails (a grammar too ambiguous to follow: it then allows nothing, and says why). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

/* Tokens of the kinds a real vocabulary has: single bytes, JSON punctuation, words, numbers, escapes,
 * whole and partial UTF-8 characters. */
static const char *const VOCAB[] = {
    "a", "b", "z", "A", "0", "1", "9", " ", "\n", "\t", "\"", "\\", "{", "}", "[", "]", ":", ",", "-", "+",
    ".", "e", "E", "x", "ab", "abc", "true", "false", "null", "{\"", "\":", "\",", " \"", "12", "-1.5e3",
    "\\u00", "\\n", "root", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xc3", "\xa9", "\xe2\x82",
};
enum { N_VOCAB = sizeof VOCAB / sizeof VOCAB[0], MAX_STEPS = 48 };

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_grammar: invariant violated: %s\n", what);
        abort();
    }
}

static woolly_vocab_trie *vocab_trie(void)
{
    static woolly_vocab_trie *trie;
    if (!trie) {
        uint32_t lens[N_VOCAB];
        for (int i = 0; i < N_VOCAB; i++)
            lens[i] = (uint32_t)strlen(VOCAB[i]);
        woolly_error err = {{0}};
        trie = woolly_vocab_trie_build(N_VOCAB, VOCAB, lens, &err);
        check(trie != NULL, "the fixed vocabulary's trie");
    }
    return trie;
}

/* The mask at the matcher's state against allows(), token by token (allows does not move the matcher). */
static void check_mask(woolly_gmatch *m)
{
    if (woolly_gmatch_failure(m))
        return; /* it allows nothing now, whatever transitions it had memoized before */
    int32_t n_allowed = -1;
    const uint32_t *mask = woolly_gmatch_mask(m, vocab_trie(), &n_allowed);
    if (!mask || woolly_gmatch_failure(m))
        return; /* out of memory, or failed on the way: the caller's error, not a wrong answer */
    int32_t count = 0;
    for (int i = 0; i < N_VOCAB; i++) {
        const bool in_mask = (mask[i / 32] >> (i % 32)) & 1u;
        const bool allowed = woolly_gmatch_allows(m, VOCAB[i], strlen(VOCAB[i]));
        if (woolly_gmatch_failure(m))
            return; /* a walk past the mask's failed */
        count += in_mask;
        check(in_mask == allowed, "a token's mask bit disagrees with allows()");
    }
    check(count == n_allowed, "the mask's count of allowed tokens");
}

static void feed(const woolly_grammar *g, const uint8_t *text, size_t len)
{
    woolly_error err = {{0}};
    woolly_gmatch *m = woolly_gmatch_open(g, &err);
    if (!m) {
        check(err.msg[0] != 0, "a matcher refused without a message");
        return;
    }
    check_mask(m);
    size_t at = 0;
    for (int step = 0; step < MAX_STEPS && at < len; step++) {
        /* chunks of 1 to 4 bytes, their length from the text itself */
        size_t n = 1 + text[at] % 4;
        if (n > len - at)
            n = len - at;
        const char *chunk = (const char *)text + at;
        const bool allowed = woolly_gmatch_allows(m, chunk, n);
        const int rc = woolly_gmatch_accept(m, chunk, n);
        check(allowed == (rc == 0) || woolly_gmatch_failure(m) != NULL,
              "accept() moved where allows() said no, or refused where it said yes");
        (void)woolly_gmatch_can_end(m);
        (void)woolly_gmatch_can_continue(m);
        check_mask(m);
        at += n;
    }
    woolly_gmatch_reset(m);
    check_mask(m);
    woolly_gmatch_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const bool schema = data[0] & 1;
    const uint8_t *src = data + 1, *nul = memchr(src, 0, size - 1);
    const size_t len = nul ? (size_t)(nul - src) : size - 1;
    woolly_error err = {{0}};
    woolly_grammar *g = schema ? woolly_grammar_from_json_schema((const char *)src, len, &err)
                               : woolly_grammar_from_gbnf((const char *)src, len, &err);
    if (!g) {
        check(err.msg[0] != 0, "a grammar refused without a message");
        return 0;
    }
    check(woolly_grammar_n_rules(g) >= 1, "a grammar without rules");
    if (schema) {
        woolly_error e2 = {{0}};
        char *gbnf = woolly_json_schema_to_gbnf((const char *)src, len, &e2);
        check(gbnf != NULL, "a schema that compiles has no GBNF text");
        woolly_grammar *again = woolly_grammar_from_gbnf(gbnf, strlen(gbnf), &e2);
        if (!again)
            fprintf(stderr, "fuzz_grammar: %s\n", e2.msg);
        check(again != NULL, "a schema's GBNF text does not parse");
        woolly_grammar_free(again);
        free(gbnf);
    }
    if (nul)
        feed(g, nul + 1, size - 1 - len - 1);
    woolly_grammar_free(g);
    return 0;
}
