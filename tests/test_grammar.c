/* The grammar engine: GBNF parsing (errors with line and column), matching by bytes (partial UTF-8
 * characters included), left recursion refused, and token masks over a vocabulary trie agreeing with
 * matching each token's text on its own; and the bounds on what a client's grammar may cost. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

static woolly_grammar *compile(const char *gbnf)
{
    woolly_error err = {{0}};
    woolly_grammar *g = woolly_grammar_from_gbnf(gbnf, strlen(gbnf), &err);
    cr_assert(g, "grammar should compile: %s\n%s", err.msg, gbnf);
    return g;
}

/* 1: a whole sentence; 0: a proper prefix only; -1: not even a prefix. */
static int classify(const char *gbnf, const char *text)
{
    woolly_grammar *g = compile(gbnf);
    woolly_gmatch *m = woolly_gmatch_open(g, NULL);
    cr_assert(m);
    int r = woolly_gmatch_accept(m, text, strlen(text)) ? -1 : woolly_gmatch_can_end(m) ? 1 : 0;
    woolly_gmatch_free(m);
    woolly_grammar_free(g);
    return r;
}

static void expect_error(const char *gbnf, const char *needle)
{
    woolly_error err = {{0}};
    woolly_grammar *g = woolly_grammar_from_gbnf(gbnf, strlen(gbnf), &err);
    cr_assert_null(g, "should fail: %s", gbnf);
    cr_assert(strstr(err.msg, needle), "message '%s' should contain '%s'", err.msg, needle);
}

Test(grammar, literals_and_alternatives)
{
    const char *g = "root ::= \"ab\" | \"cd\" \"e\"";
    cr_expect_eq(classify(g, "ab"), 1);
    cr_expect_eq(classify(g, "cde"), 1);
    cr_expect_eq(classify(g, "cd"), 0);
    cr_expect_eq(classify(g, ""), 0);
    cr_expect_eq(classify(g, "ac"), -1);
    cr_expect_eq(classify(g, "abx"), -1);
}

Test(grammar, classes_ranges_negation_any)
{
    const char *g = "root ::= [a-c0-9_] [^x-z\\n] .";
    cr_expect_eq(classify(g, "b7\xc3\xa9"), 1);
    cr_expect_eq(classify(g, "_a!"), 1);
    cr_expect_eq(classify(g, "dab"), -1);
    cr_expect_eq(classify(g, "ay"), -1);
    cr_expect_eq(classify(g, "a\n"), -1);
}

Test(grammar, repetitions)
{
    const char *g = "root ::= \"a\"* \"b\"+ \"c\"? [0-9]{2,3} (\"x\" | \"y\"){1,}";
    cr_expect_eq(classify(g, "bb12x"), 1);
    cr_expect_eq(classify(g, "aaab123yx"), 1);
    cr_expect_eq(classify(g, "bc12xyx"), 1);
    cr_expect_eq(classify(g, "b1234x"), -1);
    cr_expect_eq(classify(g, "b1x"), -1);
    cr_expect_eq(classify(g, "a12x"), -1);
    cr_expect_eq(classify(g, "b12"), 0);
    cr_expect_eq(classify("root ::= \"ab\"{2}", "abab"), 1);
    cr_expect_eq(classify("root ::= \"ab\"{2}", "ababa"), -1);
    cr_expect_eq(classify("root ::= [a]{,2}", ""), 1);
    cr_expect_eq(classify("root ::= [a]{,2}", "aaa"), -1);
}

Test(grammar, rules_comments_escapes_and_newlines)
{
    const char *g = "# a comment\n"
                    "root ::= greeting ws name   # trailing comment\n"
                    "greeting ::= \"hi\" | \"h\\u00e9\\x21\"\n"
                    "  | \"yo\"\n"
                    "ws ::= [ \\t]+\n"
                    "name ::= (\n  [A-Z] [a-z]*\n)\n";
    cr_expect_eq(classify(g, "hi  Bob"), 1);
    cr_expect_eq(classify(g, "h\xc3\xa9! Al"), 1);
    cr_expect_eq(classify(g, "yo\tZ"), 1);
    cr_expect_eq(classify(g, "hi bob"), -1);
}

Test(grammar, recursion_nests)
{
    const char *g = "root ::= item\nitem ::= \"(\" item* \")\" | \"x\"";
    cr_expect_eq(classify(g, "(x(x)(()))"), 1);
    cr_expect_eq(classify(g, "((x)"), 0);
    cr_expect_eq(classify(g, "(x))"), -1);
}

Test(grammar, partial_utf8_across_chunks)
{
    woolly_grammar *g = compile("root ::= \"\xe2\x82\xac\" [\xc3\xa0-\xc3\xbf]");
    woolly_gmatch *m = woolly_gmatch_open(g, NULL);
    cr_assert_eq(woolly_gmatch_accept(m, "\xe2", 1), 0);
    cr_assert_not(woolly_gmatch_can_end(m));
    cr_assert(woolly_gmatch_allows(m, "\x82", 1));
    cr_assert_not(woolly_gmatch_allows(m, "\x83", 1), "a different euro-range character is refused");
    cr_assert_not(woolly_gmatch_allows(m, "a", 1), "an ASCII byte cannot continue a character");
    cr_assert_eq(woolly_gmatch_accept(m, "\x82\xac\xc3", 3), 0);
    cr_assert_not(woolly_gmatch_allows(m, "\x80", 1), "U+00C0 is below the class");
    cr_assert_eq(woolly_gmatch_accept(m, "\xa9", 1), 0);
    cr_assert(woolly_gmatch_can_end(m));
    cr_assert_not(woolly_gmatch_allows(m, "\xc3", 1), "nothing may follow the end");
    woolly_gmatch_reset(m);
    cr_assert_not(woolly_gmatch_allows(m, "\x82", 1), "a stray continuation byte is refused");
    cr_assert_not(woolly_gmatch_allows(m, "\xe2\x82\xac\xe2", 4), "a lead byte out of the class' range");
    woolly_gmatch_free(m);
    woolly_grammar_free(g);
}

Test(grammar, only_well_formed_utf8)
{
    cr_expect_eq(classify("root ::= \"{\"", "\xc1\xbb"), -1, "an overlong '{' is not '{'");
    cr_expect_eq(classify("root ::= \"{\"", "\xe0\x81\xbb"), -1);
    cr_expect_eq(classify("root ::= .", "\xed\xa0\x80"), -1, "a surrogate is not a character");
    cr_expect_eq(classify("root ::= .", "\xf4\x90\x80\x80"), -1, "above U+10FFFF");
    cr_expect_eq(classify("root ::= .", "\xf0\x9f\x98\x80"), 1);
    cr_expect_eq(classify("root ::= .", "\xe0\xa0\x80"), 1);
}

Test(grammar, left_recursion_is_refused)
{
    expect_error("root ::= root \"a\" | \"b\"", "left-recursive");
    expect_error("root ::= x\nx ::= y \"a\"\ny ::= \"\" | x", "left-recursive");
    expect_error("root ::= opt root \"a\"\nopt ::= \"z\"?", "root -> root");
    /* right recursion and recursion behind a character are fine */
    cr_expect_eq(classify("root ::= \"a\" root | \"b\"", "aab"), 1);
}

Test(grammar, syntax_errors_name_line_and_column)
{
    expect_error("root ::= \"a\"\nfoo ::= [a-", "line 2, column 9: unterminated character class");
    expect_error("root ::= \"abc", "line 1, column 10: unterminated literal");
    expect_error("root ::= x\n", "line 1, column 10: rule 'x' is used but never defined");
    expect_error("root = \"a\"", "line 1, column 6: expected '::='");
    expect_error("root ::= (\"a\"", "line 1, column 10: unclosed '('");
    expect_error("root ::= \"a\"{3,1}", "line 1, column 13: repetition maximum 1 below its minimum 3");
    expect_error("root ::= \"\\q\"", "line 1, column 11: unknown escape");
    expect_error("root ::= \"a\" )", "line 1, column 14: ')' without a matching '('");
    expect_error("start ::= \"a\"", "no rule named 'root'");
    expect_error("root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice");
    expect_error("", "empty grammar");
}

/* The mask of a trie walk equals accepting each token's text on its own, on a vocabulary with multi-byte
 * characters split across tokens. */
Test(grammar, trie_mask_matches_token_by_token)
{
    static const char *const vocab[] = {"", "{", "}", "\"", "a", "ab", "abc", "\",", "\":", " ", "1", "12",
                                        "\xc3", "\xa9", "\xc3\xa9", "\xe2\x82", "\xac", "\"}", "x\"", "\\n", "\\",
                                        "true", "tr", "null", "\"a\":1}", "]"};
    const int32_t n = (int32_t)(sizeof vocab / sizeof vocab[0]);
    uint32_t lens[64];
    for (int32_t i = 0; i < n; i++)
        lens[i] = (uint32_t)strlen(vocab[i]);
    woolly_error err = {{0}};
    woolly_vocab_trie *t = woolly_vocab_trie_build(n, vocab, lens, &err);
    cr_assert(t, "%s", err.msg);
    woolly_grammar *g = woolly_grammar_from_json_schema("{\"type\":\"object\"}", 17, &err);
    cr_assert(g, "%s", err.msg);
    woolly_gmatch *m = woolly_gmatch_open(g, NULL);
    /* a fixed path of accepted tokens; the mask is checked at every step */
    static const int32_t path[] = {1, 3, 4, 12, 13, 15, 16, 19, 8, 9, 21, 2};
    for (size_t step = 0; step < sizeof path / sizeof path[0]; step++) {
        int32_t n_allowed = 0;
        const uint32_t *mask = woolly_gmatch_mask(m, t, &n_allowed);
        cr_assert(mask);
        int32_t count = 0;
        for (int32_t id = 0; id < n; id++) {
            const bool in_mask = mask[id >> 5] >> (id & 31) & 1;
            const bool ok = lens[id] > 0 && woolly_gmatch_allows(m, vocab[id], lens[id]);
            cr_assert_eq(in_mask, ok, "step %zu token %d '%s': mask %d, matching %d", step, id, vocab[id],
                         in_mask, ok);
            count += ok;
        }
        cr_assert_eq(count, n_allowed);
        const int32_t tok = path[step];
        cr_assert(mask[tok >> 5] >> (tok & 31) & 1, "step %zu: token '%s' should be allowed", step, vocab[tok]);
        cr_assert_eq(woolly_gmatch_accept(m, vocab[tok], lens[tok]), 0);
    }
    cr_assert(woolly_gmatch_can_end(m), "{\"a\u00e9\u20ac\\n\": true} is a whole object");
    woolly_gmatch_free(m);
    woolly_grammar_free(g);
    woolly_vocab_trie_free(t);
}

/* Bounds on what a client's grammar may cost (the server compiles the grammars and schemas its clients
 * send): each refused with a message or run without a deep recursion, never a crash or a hang. */

static char *repeat_text(const char *head, const char *unit, int n, const char *tail)
{
    const size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
    char *s = malloc(hl + ul * (size_t)n + tl + 1);
    cr_assert(s);
    memcpy(s, head, hl);
    for (int i = 0; i < n; i++)
        memcpy(s + hl + ul * (size_t)i, unit, ul);
    memcpy(s + hl + ul * (size_t)n, tail, tl + 1);
    return s;
}

Test(grammar_bounds, groups_nest_at_most_256_deep)
{
    char *deep = repeat_text("root ::= ", "(", 256, "\"a\"");
    char *ok = malloc(strlen(deep) + 257);
    strcpy(ok, deep);
    memset(ok + strlen(deep), ')', 256);
    ok[strlen(deep) + 256] = 0;
    cr_expect_eq(classify(ok, "a"), 1);
    char *deeper = repeat_text("root ::= ", "(", 257, "\"a\"");
    expect_error(deeper, "groups nested more than 256 deep");
    char *far = repeat_text("root ::= ", "(", 100000, "\"a\""); /* once overflowed the parser's stack */
    expect_error(far, "groups nested more than 256 deep");
    free(deep), free(ok), free(deeper), free(far);
}

/* A grammar of n rules, each beginning with the next (r0 ::= r1 "a"? ...): every walk over the rules goes
 * n deep. text: the head rules; each rule i of the chain is `r<i> ::= r<i+1> <unit>`, the last `last`. */
static char *chain(int n, const char *head, const char *unit, const char *last)
{
    char *s = malloc((size_t)n * (40 + strlen(unit)) + strlen(head) + strlen(last) + 40);
    cr_assert(s);
    size_t at = (size_t)sprintf(s, "%s\n", head);
    for (int i = 0; i < n; i++)
        at += (size_t)sprintf(s + at, "r%d ::= r%d%s\n", i, i + 1, unit);
    sprintf(s + at, "r%d ::= %s\n", n, last);
    return s;
}

Test(grammar_bounds, long_rule_chains_compile_and_match)
{
    enum { N = 200000 }; /* deeper than a thread's stack would take, one call a rule, under the sanitizers */
    char *plain = chain(N, "root ::= r0 \"y\"", "", "\"x\"");
    cr_expect_eq(classify(plain, "xy"), 1);
    cr_expect_eq(classify(plain, "x"), 0);
    /* every rule empty once the last is: found in one pass over the uses, not a pass a link */
    char *empty = chain(N, "root ::= r0 \"y\"", " \"a\"?", "\"x\"?");
    woolly_grammar *g = compile(empty);
    /* but its start has a way to go on at each of the N rules' "a"?: more than a matcher follows */
    woolly_error err = {{0}};
    cr_expect_null(woolly_gmatch_open(g, &err));
    cr_expect(strstr(err.msg, "more than 4096 ways to go on"), "%s", err.msg);
    woolly_grammar_free(g);
    char *short_empty = chain(1000, "root ::= r0 \"y\"", " \"a\"?", "\"x\"?");
    cr_expect_eq(classify(short_empty, "y"), 1);
    cr_expect_eq(classify(short_empty, "xaay"), 1);
    free(short_empty);
    /* the last rule leads back to the first through empty rules: left recursion, found N rules deep */
    char *cycle = chain(N, "root ::= r0 \"y\"", " \"a\"?", "\"x\"? | r0 \"z\"");
    expect_error(cycle, "left-recursive");
    free(plain), free(empty), free(cycle);
}

Test(grammar_bounds, a_rule_named_like_a_helper_is_its_own)
{
    /* `"a"*` makes a helper rule named after root; a rule of the same name is another rule */
    cr_expect_eq(classify("root ::= \"a\"* root-1\nroot-1 ::= \"b\"", "aab"), 1);
    cr_expect_eq(classify("root ::= (\"a\" | \"c\") root-1 root-2\nroot-1 ::= \"b\"\nroot-2 ::= \"d\"", "cbd"),
                 1);
}

Test(grammar_bounds, a_grammar_too_ambiguous_to_follow_fails_with_a_reason)
{
    /* each letter may open up to 24 more roots: the ways to parse "aaaa..." grow exponentially */
    woolly_grammar *g = compile("root ::= [a-z] root{,24}");
    woolly_gmatch *m = woolly_gmatch_open(g, NULL);
    cr_assert(m);
    cr_expect_null(woolly_gmatch_failure(m));
    int accepted = 0;
    while (accepted < 64 && woolly_gmatch_accept(m, "a", 1) == 0)
        accepted++;
    cr_assert_lt(accepted, 64, "the matcher followed 64 letters of an exponentially ambiguous grammar");
    const char *why = woolly_gmatch_failure(m);
    cr_assert(why && strstr(why, "ways to go on"), "the failure says why: %s", why ? why : "(none)");
    /* failed, it allows nothing: the output ends there */
    static const char *const vocab[] = {"a", "b"};
    const uint32_t lens[] = {1, 1};
    woolly_vocab_trie *t = woolly_vocab_trie_build(2, vocab, lens, NULL);
    int32_t n_allowed = -1;
    cr_assert(woolly_gmatch_mask(m, t, &n_allowed));
    cr_expect_eq(n_allowed, 0);
    cr_expect(!woolly_gmatch_allows(m, "b", 1));
    woolly_vocab_trie_free(t);
    woolly_gmatch_free(m);
    woolly_grammar_free(g);
}
