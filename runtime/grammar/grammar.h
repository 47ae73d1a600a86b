/* Constrained decoding: a grammar over Unicode code points, compiled from GBNF text (llama.cpp's
 * grammar format) or from a JSON Schema, and a matcher that says which tokens of a vocabulary keep the
 * output a prefix of the grammar's language.
 *
 * A compiled grammar (woolly_grammar) is immutable and may be shared by threads. Its rules are
 * alternatives of sequences of two kinds of element: a character class (ranges, maybe negated) and a
 * reference to a rule; repetitions are rewritten into helper rules when the grammar is parsed.
 *
 * A matcher (woolly_gmatch) is the run state of one output: the set of parse stacks (a pushdown
 * automaton's configurations) after the text so far, plus the bytes of an incomplete UTF-8 character.
 * Sets of stacks are interned as states and the byte transitions between them are memoized, so the
 * matcher is a lazily built DFA: walking a vocabulary's trie (woolly_vocab_trie, built once per
 * vocabulary) costs one table lookup per trie node, and a subtree is skipped as soon as its prefix is
 * rejected. The allowed-token mask of a state is cached too (inside a JSON string the state after each
 * token is the same one). */
#ifndef WOOLLY_GRAMMAR_H
#define WOOLLY_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct woolly_grammar woolly_grammar;
typedef struct woolly_gmatch woolly_gmatch;
typedef struct woolly_vocab_trie woolly_vocab_trie;

/* Parses GBNF text (`root ::= ...`; see gbnf.c for the accepted syntax). NULL with a message naming the
 * line and column of a syntax error, an undefined rule, a missing `root`, or left recursion. */
woolly_grammar *woolly_grammar_from_gbnf(const char *text, size_t len, woolly_error *err);
/* Compiles a JSON Schema (JSON text) into a grammar of the JSON documents it accepts. NULL with a message
 * naming an unsupported keyword or a malformed schema. */
woolly_grammar *woolly_grammar_from_json_schema(const char *json, size_t len, woolly_error *err);
/* The same schema compiled to GBNF text (malloc'd), for inspection and tests. */
char *woolly_json_schema_to_gbnf(const char *json, size_t len, woolly_error *err);
/* One more holder of g (a grammar is freed when its last holder frees it); returns g. */
woolly_grammar *woolly_grammar_retain(woolly_grammar *g);
void woolly_grammar_free(woolly_grammar *g);
int32_t woolly_grammar_n_rules(const woolly_grammar *g);

/* A trie over the byte strings of a vocabulary's tokens: texts[i] of lens[i] bytes is token i. Tokens
 * with no text (control tokens) are never in a mask. */
woolly_vocab_trie *woolly_vocab_trie_build(int32_t n_vocab, const char *const *texts, const uint32_t *lens,
                                           woolly_error *err);
void woolly_vocab_trie_free(woolly_vocab_trie *t);
int32_t woolly_vocab_trie_n_vocab(const woolly_vocab_trie *t);
uint32_t woolly_vocab_trie_n_nodes(const woolly_vocab_trie *t);

/* A matcher at the start of g's root rule (g must outlive it). */
woolly_gmatch *woolly_gmatch_open(const woolly_grammar *g, woolly_error *err);
void woolly_gmatch_free(woolly_gmatch *m);
/* Back to the start of the root rule. */
void woolly_gmatch_reset(woolly_gmatch *m);
/* Whether the text so far is a whole sentence of the language (an end of text is allowed here). */
bool woolly_gmatch_can_end(const woolly_gmatch *m);
/* NULL, or why the matcher failed: a state would hold more parse stacks than it may (a grammar too
 * ambiguous to follow), or memory ran out. A failed matcher allows nothing from then on. */
const char *woolly_gmatch_failure(const woolly_gmatch *m);
/* Whether some continuation exists (false only when the text so far can only end). */
bool woolly_gmatch_can_continue(const woolly_gmatch *m);
/* Whether bytes would keep the text a prefix of the language (the matcher does not move). */
bool woolly_gmatch_allows(woolly_gmatch *m, const char *bytes, size_t len);
/* Consumes bytes: 0, or -1 (the matcher does not move) if they leave the language. */
int woolly_gmatch_accept(woolly_gmatch *m, const char *bytes, size_t len);
/* The tokens of t whose whole text keeps the output a prefix of the language, as a bitset of
 * (n_vocab + 31) / 32 words (bit i of word i / 32 set for an allowed token i). End-of-text tokens are the
 * caller's business (see woolly_gmatch_can_end). The returned mask belongs to the matcher and stays valid
 * until its next call; the count of allowed tokens goes to *n_allowed. NULL on out of memory. */
const uint32_t *woolly_gmatch_mask(woolly_gmatch *m, const woolly_vocab_trie *t, int32_t *n_allowed);

#endif
