/* The matcher: parse stacks as hash-consed linked frames (a frame is a grammar position and the frame
 * below it), sets of stacks interned as states, and memoized byte transitions between states. Stacks only
 * ever hold character-class positions on top after expansion; the empty stack (frame 0) means the text
 * can end here. A reference followed by the end of its alternative pushes no return frame (a tail call),
 * so a repetition rewritten as right recursion runs in constant stack depth. */
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"

/* Past these the tables are rebuilt around the current state (checked between tokens). */
#define GM_MAX_NODES (1u << 20)
#define GM_MAX_STATES (1u << 15)
#define GM_MAX_POOL (1u << 22)
#define GM_MAX_MASKS 256u
/* The most parse stacks one state may hold. An ambiguous grammar (`root ::= [a-z] root{,24}`) can reach
 * a different set of stacks for every prefix, their count growing exponentially with its length, and a
 * long run of rules that can match nothing (r0 ::= r1 "a"?, r1 ::= r2 "a"?, ...) one a rule; each token's
 * mask walks them all: past this the matcher fails (it allows nothing) rather than hang. The grammars of
 * JSON Schemas keep a few dozen. */
#define GM_MAX_STACKS 4096
#define GM_STR(x) #x
#define GM_XSTR(x) GM_STR(x)
#define GM_DEAD 0u
#define NO_POS UINT32_MAX

typedef struct gnode {
    uint32_t pos, parent, mark;
} gnode;

typedef struct gst {
    uint32_t off, n; /* the state's frames, sorted, in pool[off..off+n) */
    uint32_t partial;  /* an incomplete UTF-8 character (PARTIAL below), 0 none */
    uint32_t hash;
    int32_t *next;     /* [256] the state after each byte (-1 not computed yet), or NULL */
    uint32_t *mask;    /* the allowed-token mask of mask_trie, or NULL */
    int32_t n_allowed;
} gst;

struct woolly_gmatch {
    const woolly_grammar *g;
    gnode *nodes;
    uint32_t n_nodes, cap_nodes;
    uint32_t *node_ht; /* open addressing over node ids (0: free slot) */
    uint32_t node_ht_cap;
    uint32_t *pool;
    uint32_t n_pool, cap_pool;
    gst *states;
    uint32_t n_states, cap_states;
    uint32_t *state_ht;
    uint32_t state_ht_cap;
    uint32_t stamp;
    uint32_t *tmp;
    uint32_t n_tmp, cap_tmp;
    uint32_t *work; /* expand's stack of frames to visit */
    uint32_t n_work, cap_work;
    uint32_t start, cur;
    bool failed;    /* out of memory, or a state of more than GM_MAX_STACKS stacks: nothing is allowed */
    bool ambiguous; /* the latter */
    const woolly_vocab_trie *mask_trie;
    uint32_t n_masks;
    uint32_t *walk;     /* [max_depth + 1] states along the trie path */
    uint32_t walk_cap;
    uint32_t *out_mask; /* when a mask cannot be cached */
};

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t size)
{
    return grammar_grow(p, cap, need, size, 64);
}

static inline uint32_t mix(uint32_t h, uint32_t v)
{
    h ^= v + 0x9E3779B9u + (h << 6) + (h >> 2);
    return h * 0x85EBCA6Bu;
}

static bool rehash_nodes(woolly_gmatch *m, uint32_t cap)
{
    uint32_t *ht = calloc(cap, sizeof *ht);
    if (!ht)
        return false;
    for (uint32_t id = 1; id < m->n_nodes; id++) {
        uint32_t i = mix(m->nodes[id].pos, m->nodes[id].parent) & (cap - 1);
        while (ht[i])
            i = (i + 1) & (cap - 1);
        ht[i] = id;
    }
    free(m->node_ht);
    m->node_ht = ht;
    m->node_ht_cap = cap;
    return true;
}

static uint32_t node(woolly_gmatch *m, uint32_t pos, uint32_t parent)
{
    if (m->n_nodes * 2 >= m->node_ht_cap && !rehash_nodes(m, m->node_ht_cap * 2)) {
        m->failed = true;
        return 0;
    }
    uint32_t i = mix(pos, parent) & (m->node_ht_cap - 1);
    for (; m->node_ht[i]; i = (i + 1) & (m->node_ht_cap - 1)) {
        const gnode *n = &m->nodes[m->node_ht[i]];
        if (n->pos == pos && n->parent == parent)
            return m->node_ht[i];
    }
    if (!grow((void **)&m->nodes, &m->cap_nodes, m->n_nodes + 1, sizeof *m->nodes)) {
        m->failed = true;
        return 0;
    }
    m->nodes[m->n_nodes] = (gnode){pos, parent, 0};
    m->node_ht[i] = m->n_nodes;
    return m->n_nodes++;
}

static void emit(woolly_gmatch *m, uint32_t id)
{
    if (m->n_tmp >= (uint32_t)GM_MAX_STACKS) {
        m->failed = m->ambiguous = true;
        return;
    }
    if (!grow((void **)&m->tmp, &m->cap_tmp, m->n_tmp + 1, sizeof *m->tmp)) {
        m->failed = true;
        return;
    }
    m->tmp[m->n_tmp++] = id;
}

static void push_work(woolly_gmatch *m, uint32_t id)
{
    if (!grow((void **)&m->work, &m->cap_work, m->n_work + 1, sizeof *m->work)) {
        m->failed = true;
        return;
    }
    m->work[m->n_work++] = id;
}

/* Adds to tmp the stacks with a character class on top that frame id stands for. A depth-first walk
 * with a stack of its own, not the thread's: a chain of rules each of which begins with the next one
 * (r0 ::= r1 ..., r1 ::= r2 ..., as a client's grammar may have by the thousand) goes as deep as it is
 * long. */
static void expand(woolly_gmatch *m, uint32_t id)
{
    const woolly_grammar *g = m->g;
    m->n_work = 0;
    push_work(m, id);
    while (m->n_work > 0 && !m->failed) {
        id = m->work[--m->n_work];
        if (m->nodes[id].mark == m->stamp)
            continue;
        m->nodes[id].mark = m->stamp;
        if (id == 0) {
            emit(m, 0);
            continue;
        }
        const uint32_t pos = m->nodes[id].pos, parent = m->nodes[id].parent, e = g->elems[pos];
        switch (GE_KIND(e)) {
        case GE_CLASS: emit(m, id); break;
        case GE_END: push_work(m, parent); break;
        default: {
            const uint32_t r = GE_ARG(e);
            const uint32_t ret = g->elems[pos + 1] == GE_END ? parent : node(m, pos + 1, parent);
            for (uint32_t a = g->rule_alt[r + 1]; a-- > g->rule_alt[r] && !m->failed;)
                push_work(m, node(m, g->alt_start[a], ret)); /* the first alternative on top */
        }
        }
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static bool rehash_states(woolly_gmatch *m, uint32_t cap)
{
    uint32_t *ht = calloc(cap, sizeof *ht);
    if (!ht)
        return false;
    for (uint32_t s = 1; s < m->n_states; s++) {
        uint32_t i = m->states[s].hash & (cap - 1);
        while (ht[i])
            i = (i + 1) & (cap - 1);
        ht[i] = s;
    }
    free(m->state_ht);
    m->state_ht = ht;
    m->state_ht_cap = cap;
    return true;
}

/* The state of the n frames ids (sorted, distinct) with partial; GM_DEAD if there are none. */
static uint32_t intern_state(woolly_gmatch *m, const uint32_t *ids, uint32_t n, uint32_t partial)
{
    if (n == 0 || m->failed)
        return GM_DEAD;
    if (m->n_states * 2 >= m->state_ht_cap && !rehash_states(m, m->state_ht_cap * 2)) {
        m->failed = true;
        return GM_DEAD;
    }
    uint32_t h = mix(0x1234567u, partial);
    for (uint32_t i = 0; i < n; i++)
        h = mix(h, ids[i]);
    uint32_t i = h & (m->state_ht_cap - 1);
    for (; m->state_ht[i]; i = (i + 1) & (m->state_ht_cap - 1)) {
        const gst *s = &m->states[m->state_ht[i]];
        if (s->hash == h && s->n == n && s->partial == partial && !memcmp(m->pool + s->off, ids, n * sizeof *ids))
            return m->state_ht[i];
    }
    if (!grow((void **)&m->states, &m->cap_states, m->n_states + 1, sizeof *m->states) ||
        !grow((void **)&m->pool, &m->cap_pool, m->n_pool + n, sizeof *m->pool)) {
        m->failed = true;
        return GM_DEAD;
    }
    memcpy(m->pool + m->n_pool, ids, n * sizeof *ids);
    m->states[m->n_states] = (gst){.off = m->n_pool, .n = n, .partial = partial, .hash = h};
    m->n_pool += n;
    m->state_ht[i] = m->n_states;
    return m->n_states++;
}

/* The state after code point cp from state s (whose partial is done with). */
static uint32_t advance(woolly_gmatch *m, uint32_t s, uint32_t cp)
{
    const woolly_grammar *g = m->g;
    m->stamp++;
    m->n_tmp = 0;
    for (uint32_t k = 0; k < m->states[s].n && !m->failed; k++) {
        const uint32_t id = m->pool[m->states[s].off + k];
        if (id == 0)
            continue;
        const uint32_t pos = m->nodes[id].pos;
        if (gclass_matches(g, GE_ARG(g->elems[pos]), cp))
            expand(m, node(m, pos + 1, m->nodes[id].parent));
    }
    qsort(m->tmp, m->n_tmp, sizeof *m->tmp, cmp_u32);
    return intern_state(m, m->tmp, m->n_tmp, 0);
}

/* The same frames as s, waiting for the rest of a character in [lo, hi]: dead unless some class on top
 * matches a code point there. */
static uint32_t pending(woolly_gmatch *m, uint32_t s, uint32_t partial, uint32_t lo, uint32_t hi)
{
    const woolly_grammar *g = m->g;
    bool live = false;
    for (uint32_t k = 0; k < m->states[s].n && !live; k++) {
        const uint32_t id = m->pool[m->states[s].off + k];
        live = id != 0 && gclass_intersects(g, GE_ARG(g->elems[m->nodes[id].pos]), lo, hi);
    }
    if (!live)
        return GM_DEAD;
    if (!grow((void **)&m->tmp, &m->cap_tmp, m->states[s].n, sizeof *m->tmp)) {
        m->failed = true;
        return GM_DEAD;
    }
    memcpy(m->tmp, m->pool + m->states[s].off, m->states[s].n * sizeof *m->tmp);
    return intern_state(m, m->tmp, m->states[s].n, partial);
}

/* An incomplete character: its length in bytes - 1 (bits 30-31), the bytes still due (28-29), the bits
 * so far (0-20). */
#define PARTIAL(len, due, bits) ((uint32_t)((len) - 1) << 30 | (uint32_t)(due) << 28 | (bits))
#define PARTIAL_LEN(p) (((p) >> 30) + 1)
#define PARTIAL_DUE(p) (((p) >> 28) & 3u)
#define PARTIAL_BITS(p) ((p) & 0x0FFFFFFFu)

/* The smallest code point a len-byte sequence may encode (shorter forms are overlong, not UTF-8). */
static const uint32_t UTF8_MIN[5] = {0, 0, 0x80, 0x800, 0x10000};

/* Well-formed UTF-8 only (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF, so that a
 * grammar's classes cannot be met by another spelling of a character. */
static uint32_t step_partial(woolly_gmatch *m, uint32_t s, uint32_t partial, uint8_t b)
{
    const uint32_t len = PARTIAL_LEN(partial);
    uint32_t due = PARTIAL_DUE(partial), bits = PARTIAL_BITS(partial);
    if ((b & 0xC0) != 0x80)
        return GM_DEAD;
    if (due == len - 1) { /* the second byte: the ranges the lead byte allows */
        if ((len == 3 && bits == 0x0 && b < 0xA0) || (len == 3 && bits == 0xD && b > 0x9F) ||
            (len == 4 && bits == 0x0 && b < 0x90) || (len == 4 && bits == 0x4 && b > 0x8F))
            return GM_DEAD;
    }
    bits = (bits << 6) | (b & 0x3Fu);
    if (--due == 0)
        return advance(m, s, bits);
    uint32_t lo = bits << (6 * due), hi = lo | ((1u << (6 * due)) - 1);
    return pending(m, s, PARTIAL(len, due, bits), lo, hi);
}

static uint32_t step_slow(woolly_gmatch *m, uint32_t s, uint8_t b)
{
    uint32_t r;
    const uint32_t partial = m->states[s].partial;
    if (partial) {
        r = step_partial(m, s, partial, b);
    } else if (b < 0x80) {
        r = advance(m, s, b);
    } else {
        uint32_t len = 0, bits = 0;
        if (b >= 0xC2 && b <= 0xDF)
            len = 2, bits = b & 0x1Fu;
        else if ((b & 0xF0) == 0xE0)
            len = 3, bits = b & 0x0Fu;
        else if (b >= 0xF0 && b <= 0xF4)
            len = 4, bits = b & 0x07u;
        if (!len) {
            r = GM_DEAD;
        } else {
            const uint32_t due = len - 1;
            uint32_t lo = bits << (6 * due), hi = lo | ((1u << (6 * due)) - 1);
            lo = lo < UTF8_MIN[len] ? UTF8_MIN[len] : lo;
            hi = hi > 0x10FFFF ? 0x10FFFF : hi;
            r = pending(m, s, PARTIAL(len, due, bits), lo, hi);
        }
    }
    if (!m->states[s].next) {
        int32_t *t = malloc(256 * sizeof *t);
        if (!t)
            return r; /* not memoized: only slower */
        memset(t, 0xFF, 256 * sizeof *t);
        m->states[s].next = t;
    }
    m->states[s].next[b] = (int32_t)r;
    return r;
}

static inline uint32_t step(woolly_gmatch *m, uint32_t s, uint8_t b)
{
    const int32_t *t = m->states[s].next;
    if (t && t[b] >= 0)
        return (uint32_t)t[b];
    return step_slow(m, s, b);
}

static uint32_t start_state(woolly_gmatch *m)
{
    const woolly_grammar *g = m->g;
    m->stamp++;
    m->n_tmp = 0;
    for (uint32_t a = g->rule_alt[g->root]; a < g->rule_alt[g->root + 1]; a++)
        expand(m, node(m, g->alt_start[a], 0));
    qsort(m->tmp, m->n_tmp, sizeof *m->tmp, cmp_u32);
    return intern_state(m, m->tmp, m->n_tmp, 0);
}

static void clear_tables(woolly_gmatch *m)
{
    for (uint32_t s = 0; s < m->n_states; s++) {
        free(m->states[s].next);
        free(m->states[s].mask);
    }
    m->n_states = 1; /* state 0: dead */
    m->states[0] = (gst){0};
    memset(m->state_ht, 0, m->state_ht_cap * sizeof *m->state_ht);
    m->n_pool = 0;
    m->n_nodes = 1; /* frame 0: the empty stack */
    m->nodes[0] = (gnode){NO_POS, 0, 0};
    memset(m->node_ht, 0, m->node_ht_cap * sizeof *m->node_ht);
    m->n_masks = 0;
}

/* Rebuilds the tables holding only the current state, when speculative walks have filled them. */
static void compact(woolly_gmatch *m)
{
    if (m->n_nodes < GM_MAX_NODES && m->n_states < GM_MAX_STATES && m->n_pool < GM_MAX_POOL)
        return;
    const gst cur = m->states[m->cur];
    uint32_t total = 0;
    for (uint32_t k = 0; k < cur.n; k++)
        for (uint32_t id = m->pool[cur.off + k]; id; id = m->nodes[id].parent)
            total++;
    uint32_t *saved = malloc(sizeof *saved * (total + cur.n + 1));
    if (!saved)
        return; /* keep the big tables */
    uint32_t w = 0;
    for (uint32_t k = 0; k < cur.n; k++) { /* each stack as its depth then positions top first */
        uint32_t d = 0;
        for (uint32_t id = m->pool[cur.off + k]; id; id = m->nodes[id].parent)
            d++;
        saved[w++] = d;
        for (uint32_t id = m->pool[cur.off + k]; id; id = m->nodes[id].parent)
            saved[w++] = m->nodes[id].pos;
    }
    clear_tables(m);
    m->n_tmp = 0;
    for (uint32_t r = 0, k = 0; k < cur.n; k++) {
        uint32_t d = saved[r++], id = 0;
        for (uint32_t i = d; i-- > 0;)
            id = node(m, saved[r + i], id);
        r += d;
        emit(m, id);
    }
    free(saved);
    qsort(m->tmp, m->n_tmp, sizeof *m->tmp, cmp_u32);
    uint32_t n = m->n_tmp;
    m->cur = intern_state(m, m->tmp, n, cur.partial);
    m->start = start_state(m);
}

woolly_gmatch *woolly_gmatch_open(const woolly_grammar *g, woolly_error *err)
{
    woolly_gmatch *m = calloc(1, sizeof *m);
    if (!m)
        goto oom;
    m->g = g;
    m->node_ht_cap = 1024;
    m->state_ht_cap = 256;
    m->node_ht = calloc(m->node_ht_cap, sizeof *m->node_ht);
    m->state_ht = calloc(m->state_ht_cap, sizeof *m->state_ht);
    if (!m->node_ht || !m->state_ht || !grow((void **)&m->nodes, &m->cap_nodes, 1, sizeof *m->nodes) ||
        !grow((void **)&m->states, &m->cap_states, 1, sizeof *m->states))
        goto oom;
    clear_tables(m);
    m->start = m->cur = start_state(m);
    if (m->failed) { /* no memory, or a start with too many ways to go on */
        woolly_fail(err, "grammar: %s", woolly_gmatch_failure(m));
        woolly_gmatch_free(m);
        return NULL;
    }
    return m;
oom:
    woolly_gmatch_free(m);
    woolly_fail(err, "grammar: out of memory for a matcher");
    return NULL;
}

void woolly_gmatch_free(woolly_gmatch *m)
{
    if (!m)
        return;
    for (uint32_t s = 0; s < m->n_states; s++) {
        free(m->states[s].next);
        free(m->states[s].mask);
    }
    free(m->states);
    free(m->state_ht);
    free(m->nodes);
    free(m->node_ht);
    free(m->pool);
    free(m->tmp);
    free(m->work);
    free(m->walk);
    free(m->out_mask);
    free(m);
}

void woolly_gmatch_reset(woolly_gmatch *m)
{
    m->cur = m->start;
}

bool woolly_gmatch_can_end(const woolly_gmatch *m)
{
    const gst *s = &m->states[m->cur];
    return s->n > 0 && s->partial == 0 && m->pool[s->off] == 0; /* sorted: frame 0 first */
}

const char *woolly_gmatch_failure(const woolly_gmatch *m)
{
    if (!m->failed)
        return NULL;
    if (m->ambiguous)
        return "the grammar leaves more than " GM_XSTR(GM_MAX_STACKS) " ways to go on from a text (an "
               "ambiguous grammar, or a long run of rules that can match nothing)";
    return "out of memory for the grammar's matcher";
}

bool woolly_gmatch_can_continue(const woolly_gmatch *m)
{
    const gst *s = &m->states[m->cur];
    return s->partial != 0 || s->n > 1 || (s->n == 1 && m->pool[s->off] != 0);
}

static uint32_t walk_bytes(woolly_gmatch *m, const char *bytes, size_t len)
{
    uint32_t s = m->cur;
    for (size_t i = 0; i < len && s != GM_DEAD; i++)
        s = step(m, s, (uint8_t)bytes[i]);
    return s;
}

bool woolly_gmatch_allows(woolly_gmatch *m, const char *bytes, size_t len)
{
    return walk_bytes(m, bytes, len) != GM_DEAD;
}

int woolly_gmatch_accept(woolly_gmatch *m, const char *bytes, size_t len)
{
    uint32_t s = walk_bytes(m, bytes, len);
    if (s == GM_DEAD)
        return -1;
    m->cur = s;
    compact(m);
    return 0;
}

const uint32_t *woolly_gmatch_mask(woolly_gmatch *m, const woolly_vocab_trie *t, int32_t *n_allowed)
{
    const size_t words = ((size_t)t->n_vocab + 31) / 32;
    if (m->mask_trie != t) { /* masks are per vocabulary */
        for (uint32_t s = 0; s < m->n_states; s++) {
            free(m->states[s].mask);
            m->states[s].mask = NULL;
        }
        m->n_masks = 0;
        free(m->out_mask);
        free(m->walk);
        m->walk_cap = t->max_depth + 1;
        m->out_mask = malloc(words * sizeof *m->out_mask);
        m->walk = malloc(m->walk_cap * sizeof *m->walk);
        if (!m->out_mask || !m->walk) {
            m->mask_trie = NULL;
            return NULL;
        }
        m->mask_trie = t;
    }
    const uint32_t cur = m->cur;
    if (m->states[cur].mask) {
        *n_allowed = m->states[cur].n_allowed;
        return m->states[cur].mask;
    }
    uint32_t *mask = NULL;
    if (m->n_masks >= GM_MAX_MASKS) { /* start over rather than track use */
        for (uint32_t s = 0; s < m->n_states; s++) {
            free(m->states[s].mask);
            m->states[s].mask = NULL;
        }
        m->n_masks = 0;
    }
    mask = malloc(words * sizeof *mask);
    if (!mask)
        mask = m->out_mask;
    memset(mask, 0, words * sizeof *mask);

    int32_t n = 0;
    uint32_t *st = m->walk;
    st[0] = cur;
    const uint8_t *byte = t->byte;
    const uint16_t *depth = t->depth;
    for (uint32_t i = 1; i < t->n_nodes;) {
        const uint32_t d = depth[i];
        const uint32_t s = step(m, st[d - 1], byte[i]);
        if (s == GM_DEAD) {
            i = t->skip[i];
            continue;
        }
        st[d] = s;
        for (uint32_t k = t->tok_off[i]; k < t->tok_off[i + 1]; k++) {
            const int32_t id = t->toks[k];
            mask[id >> 5] |= 1u << (id & 31);
            n++;
        }
        i++;
    }
    if (m->failed) { /* a state could not be made: allow nothing rather than guess */
        memset(mask, 0, words * sizeof *mask);
        n = 0;
    }
    if (mask != m->out_mask) {
        m->states[cur].mask = mask;
        m->states[cur].n_allowed = n;
        m->n_masks++;
    }
    *n_allowed = n;
    return mask;
}
