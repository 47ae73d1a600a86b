/* The compiled form of a grammar, and the builder its front ends (GBNF, JSON Schema) fill. */
#ifndef WOOLLY_GRAMMAR_IMPL_H
#define WOOLLY_GRAMMAR_IMPL_H

#include <stdatomic.h>

#include "grammar.h"

/* An element is one word: its kind in the top two bits, its argument (a class or rule index) below. */
#define GE_END 0u /* the end of an alternative */
#define GE_CLASS (1u << 30)
#define GE_REF (2u << 30)
#define GE_KIND(e) ((e) & (3u << 30))
#define GE_ARG(e) ((e) & ~(3u << 30))

typedef struct grange {
    uint32_t lo, hi; /* code points, inclusive */
} grange;

typedef struct gclass {
    uint32_t off, n; /* ranges[off..off+n) */
    bool negated;
} gclass;

struct woolly_grammar {
    _Atomic int refs; /* holders: woolly_grammar_retain adds one, woolly_grammar_free drops one */
    uint32_t *elems; /* every alternative's elements, each alternative ended by GE_END */
    uint32_t n_elems;
    uint32_t *alt_start; /* where each alternative begins in elems */
    uint32_t *rule_alt;  /* [n_rules + 1]: rule r's alternatives are alt_start[rule_alt[r]..rule_alt[r+1]) */
    uint32_t n_rules, root;
    gclass *classes;
    grange *ranges;
    char **names; /* for messages; helper rules are named after the rule they came from */
};

static inline bool gclass_matches(const woolly_grammar *g, uint32_t cls, uint32_t cp)
{
    const gclass *c = &g->classes[cls];
    bool in = false;
    for (uint32_t i = 0; i < c->n; i++) /* a grammar of classes without ranges (`.`) has ranges NULL */
        if (cp >= g->ranges[c->off + i].lo && cp <= g->ranges[c->off + i].hi) {
            in = true;
            break;
        }
    return in != c->negated;
}

/* Whether the class matches some code point in [lo, hi]. */
bool gclass_intersects(const woolly_grammar *g, uint32_t cls, uint32_t lo, uint32_t hi);

/* Grows the array *p of *cap elements of `size` bytes to hold at least `need` (doubling, from `first`);
 * false when out of memory, *p and *cap then unchanged. */
bool grammar_grow(void **p, uint32_t *cap, uint32_t need, size_t size, uint32_t first);

/* ---- builder ---- */
typedef struct gb_seq {
    uint32_t *e;
    uint32_t n, cap;
} gb_seq;

typedef struct gb_rule {
    char *name;
    gb_seq *alts;
    uint32_t n_alts, cap_alts;
    bool defined;
    uint32_t line, col; /* where it was first named, for "undefined rule" */
} gb_rule;

typedef struct gbuilder {
    gb_rule *rules;
    uint32_t n_rules, cap_rules;
    grange *ranges;
    uint32_t n_ranges, cap_ranges;
    gclass *classes;
    uint32_t n_classes, cap_classes;
    uint32_t *named;    /* open addressing over the named rules (helpers are not looked up): index + 1 */
    uint32_t n_named, cap_named;
    bool oom;
} gbuilder;

void gb_init(gbuilder *b);
void gb_free(gbuilder *b);
/* The rule named name (created undefined on first use); UINT32_MAX on out of memory. */
uint32_t gb_named_rule(gbuilder *b, const char *name, size_t len, uint32_t line, uint32_t col);
/* A new helper rule, named after rule parent. */
uint32_t gb_helper_rule(gbuilder *b, uint32_t parent);
/* Starts a new alternative of rule r; returns its index. */
uint32_t gb_alt(gbuilder *b, uint32_t r);
void gb_push(gbuilder *b, uint32_t r, uint32_t alt, uint32_t elem);
/* A class from n ranges; returns the GE_CLASS element. */
uint32_t gb_class(gbuilder *b, const grange *ranges, uint32_t n, bool negated);
uint32_t gb_char(gbuilder *b, uint32_t cp);
/* Repetition of one element x into rule r's alternative alt: {min, max} (max UINT32_MAX: unbounded). */
void gb_repeat(gbuilder *b, uint32_t r, uint32_t alt, uint32_t x, uint32_t min, uint32_t max);
/* The grammar whose start is the rule named root; NULL with a message (an undefined rule, no root,
 * left recursion). The builder is left empty. */
woolly_grammar *gb_finish(gbuilder *b, const char *root, woolly_error *err);

#endif /* WOOLLY_GRAMMAR_IMPL_H */

/* ---- the vocabulary trie, in depth-first order: node i's subtree is [i, skip[i]) ---- */
struct woolly_vocab_trie {
    int32_t n_vocab;
    uint32_t n_nodes; /* node 0 is the root (the empty prefix) */
    uint32_t max_depth;
    uint8_t *byte;     /* the byte leading into node i */
    uint16_t *depth;   /* node i's prefix length */
    uint32_t *skip;    /* the first node after i's subtree */
    uint32_t *tok_off; /* [n_nodes + 1]: the tokens whose text is node i's prefix are toks[tok_off[i]..] */
    int32_t *toks;
};
