/* The grammar builder: rules collected by a front end, then flattened into the compiled form and checked
 * (every rule defined, a root, no left recursion). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"

bool grammar_grow(void **p, uint32_t *cap, uint32_t need, size_t size, uint32_t first)
{
    if (need <= *cap)
        return true;
    uint32_t c = *cap ? *cap * 2 : first;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t size)
{
    return grammar_grow(p, cap, need, size, 8);
}

void gb_init(gbuilder *b)
{
    memset(b, 0, sizeof *b);
}

void gb_free(gbuilder *b)
{
    for (uint32_t r = 0; r < b->n_rules; r++) {
        for (uint32_t a = 0; a < b->rules[r].n_alts; a++)
            free(b->rules[r].alts[a].e);
        free(b->rules[r].alts);
        free(b->rules[r].name);
    }
    free(b->rules);
    free(b->ranges);
    free(b->classes);
    free(b->named);
    memset(b, 0, sizeof *b);
}

static uint32_t new_rule(gbuilder *b, char *name)
{
    if (!name || !grow((void **)&b->rules, &b->cap_rules, b->n_rules + 1, sizeof *b->rules)) {
        free(name);
        b->oom = true;
        return UINT32_MAX;
    }
    memset(&b->rules[b->n_rules], 0, sizeof b->rules[0]);
    b->rules[b->n_rules].name = name;
    return b->n_rules++;
}

static uint32_t name_hash(const char *name, size_t len)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)name[i]) * 16777619u;
    return h;
}

/* The slot of name in b->named: its rule's index + 1 there, or 0 where it would go. */
static uint32_t *name_slot(gbuilder *b, const char *name, size_t len)
{
    uint32_t i = name_hash(name, len) & (b->cap_named - 1);
    for (; b->named[i]; i = (i + 1) & (b->cap_named - 1)) {
        const char *n = b->rules[b->named[i] - 1].name;
        if (strlen(n) == len && !memcmp(n, name, len))
            break;
    }
    return &b->named[i];
}

/* Room for one more named rule in the table, at most half full (a grammar of thousands of rules, as a
 * client may send, is looked up in constant time a name). */
static bool name_room(gbuilder *b)
{
    if ((b->n_named + 1) * 2 <= b->cap_named)
        return true;
    const uint32_t old_cap = b->cap_named, cap = old_cap ? old_cap * 2 : 64;
    uint32_t *old = b->named, *t = calloc(cap, sizeof *t);
    if (!t)
        return false;
    b->named = t;
    b->cap_named = cap;
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i]) {
            const char *n = b->rules[old[i] - 1].name;
            *name_slot(b, n, strlen(n)) = old[i];
        }
    free(old);
    return true;
}

uint32_t gb_named_rule(gbuilder *b, const char *name, size_t len, uint32_t line, uint32_t col)
{
    if (!name_room(b)) {
        b->oom = true;
        return UINT32_MAX;
    }
    uint32_t *slot = name_slot(b, name, len);
    if (*slot)
        return *slot - 1;
    char *s = malloc(len + 1);
    if (s) {
        memcpy(s, name, len);
        s[len] = 0;
    }
    uint32_t r = new_rule(b, s);
    if (r != UINT32_MAX) {
        b->rules[r].line = line;
        b->rules[r].col = col;
        *slot = r + 1;
        b->n_named++;
    }
    return r;
}

uint32_t gb_helper_rule(gbuilder *b, uint32_t parent)
{
    const char *base = parent < b->n_rules ? b->rules[parent].name : "rule";
    size_t n = strlen(base) + 16;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s-%u", base, b->n_rules);
    uint32_t r = new_rule(b, s);
    if (r != UINT32_MAX)
        b->rules[r].defined = true;
    return r;
}

uint32_t gb_alt(gbuilder *b, uint32_t r)
{
    if (r >= b->n_rules)
        return UINT32_MAX;
    gb_rule *R = &b->rules[r];
    if (!grow((void **)&R->alts, &R->cap_alts, R->n_alts + 1, sizeof *R->alts)) {
        b->oom = true;
        return UINT32_MAX;
    }
    memset(&R->alts[R->n_alts], 0, sizeof R->alts[0]);
    return R->n_alts++;
}

void gb_push(gbuilder *b, uint32_t r, uint32_t alt, uint32_t elem)
{
    if (r >= b->n_rules || alt >= b->rules[r].n_alts || elem == UINT32_MAX) {
        b->oom = true;
        return;
    }
    gb_seq *s = &b->rules[r].alts[alt];
    if (!grow((void **)&s->e, &s->cap, s->n + 1, sizeof *s->e)) {
        b->oom = true;
        return;
    }
    s->e[s->n++] = elem;
}

uint32_t gb_class(gbuilder *b, const grange *ranges, uint32_t n, bool negated)
{
    if (!grow((void **)&b->ranges, &b->cap_ranges, b->n_ranges + n, sizeof *b->ranges) ||
        !grow((void **)&b->classes, &b->cap_classes, b->n_classes + 1, sizeof *b->classes)) {
        b->oom = true;
        return UINT32_MAX;
    }
    if (n) /* `.` has no ranges */
        memcpy(b->ranges + b->n_ranges, ranges, n * sizeof *ranges);
    b->classes[b->n_classes] = (gclass){b->n_ranges, n, negated};
    b->n_ranges += n;
    return GE_CLASS | b->n_classes++;
}

uint32_t gb_char(gbuilder *b, uint32_t cp)
{
    grange r = {cp, cp};
    return gb_class(b, &r, 1, false);
}

void gb_repeat(gbuilder *b, uint32_t r, uint32_t alt, uint32_t x, uint32_t min, uint32_t max)
{
    for (uint32_t i = 0; i < min; i++)
        gb_push(b, r, alt, x);
    if (max == UINT32_MAX) { /* S ::= x S | (empty): right recursion, which the matcher runs as a loop */
        uint32_t s = gb_helper_rule(b, r);
        uint32_t a = gb_alt(b, s);
        gb_push(b, s, a, x);
        gb_push(b, s, a, GE_REF | s);
        gb_alt(b, s);
        gb_push(b, r, alt, GE_REF | s);
        return;
    }
    uint32_t inner = UINT32_MAX; /* R_k ::= x R_(k-1) | (empty), R_1 ::= x | (empty) */
    for (uint32_t k = min; k < max; k++) {
        uint32_t s = gb_helper_rule(b, r);
        uint32_t a = gb_alt(b, s);
        gb_push(b, s, a, x);
        if (inner != UINT32_MAX)
            gb_push(b, s, a, GE_REF | inner);
        gb_alt(b, s);
        inner = s;
    }
    if (inner != UINT32_MAX)
        gb_push(b, r, alt, GE_REF | inner);
}

bool gclass_intersects(const woolly_grammar *g, uint32_t cls, uint32_t lo, uint32_t hi)
{
    const gclass *c = &g->classes[cls];
    /* ranges is NULL in a grammar whose only class is `.` */
    const grange *r = c->n ? g->ranges + c->off : NULL;
    if (!c->negated) {
        for (uint32_t i = 0; i < c->n; i++)
            if (r[i].lo <= hi && r[i].hi >= lo)
                return true;
        return false;
    }
    /* Negated: some point of [lo, hi] lies outside every range. Walk lo upwards past covering ranges. */
    for (uint32_t cp = lo;;) {
        bool moved = false;
        for (uint32_t i = 0; i < c->n; i++)
            if (cp >= r[i].lo && cp <= r[i].hi) {
                if (r[i].hi >= hi)
                    return false;
                cp = r[i].hi + 1;
                moved = true;
            }
        if (!moved)
            return true;
    }
}

woolly_grammar *woolly_grammar_retain(woolly_grammar *g)
{
    if (g)
        atomic_fetch_add(&g->refs, 1);
    return g;
}

void woolly_grammar_free(woolly_grammar *g)
{
    if (!g || atomic_fetch_sub(&g->refs, 1) > 1)
        return;
    if (g->names)
        for (uint32_t r = 0; r < g->n_rules; r++)
            free(g->names[r]);
    free(g->names);
    free(g->elems);
    free(g->alt_start);
    free(g->rule_alt);
    free(g->classes);
    free(g->ranges);
    free(g);
}

int32_t woolly_grammar_n_rules(const woolly_grammar *g)
{
    return (int32_t)g->n_rules;
}

/* The rules that can match the empty string: an alternative is empty once every element of it is a
 * reference to such a rule. A worklist over each rule's uses, so that a long chain of rules, each empty
 * only if the next one is, takes one pass rather than one per link. */
static int find_nullable(const woolly_grammar *g, bool *nullable)
{
    const uint32_t n_alts = g->rule_alt[g->n_rules];
    uint32_t *left = calloc(n_alts, sizeof *left);                /* an alternative's elements not empty yet */
    uint32_t *alt_rule = malloc(sizeof *alt_rule * (n_alts + 1)); /* the rule of each alternative */
    uint32_t *use_at = calloc(g->n_rules + 1, sizeof *use_at);    /* rule s's uses: use_alt[use_at[s]..] */
    uint32_t *use_alt = NULL, *queue = malloc(sizeof *queue * (g->n_rules + 1));
    int rc = -1;
    if (!left || !alt_rule || !use_at || !queue)
        goto done;
    uint32_t n_uses = 0;
    for (uint32_t r = 0; r < g->n_rules; r++)
        for (uint32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++) {
            alt_rule[a] = r;
            for (uint32_t p = g->alt_start[a]; g->elems[p] != GE_END; p++) {
                left[a]++;
                if (GE_KIND(g->elems[p]) == GE_REF) {
                    use_at[GE_ARG(g->elems[p]) + 1]++;
                    n_uses++;
                }
            }
        }
    for (uint32_t r = 0; r < g->n_rules; r++)
        use_at[r + 1] += use_at[r];
    use_alt = malloc(sizeof *use_alt * (n_uses + 1));
    uint32_t *fill = calloc(g->n_rules, sizeof *fill);
    if (!use_alt || !fill) {
        free(fill);
        goto done;
    }
    for (uint32_t a = 0; a < n_alts; a++)
        for (uint32_t p = g->alt_start[a]; g->elems[p] != GE_END; p++)
            if (GE_KIND(g->elems[p]) == GE_REF) {
                const uint32_t t = GE_ARG(g->elems[p]);
                use_alt[use_at[t] + fill[t]++] = a;
            }
    free(fill);
    uint32_t n_queue = 0;
    for (uint32_t a = 0; a < n_alts; a++)
        if (left[a] == 0 && !nullable[alt_rule[a]]) {
            nullable[alt_rule[a]] = true;
            queue[n_queue++] = alt_rule[a];
        }
    while (n_queue > 0) { /* a class element never empties, so its alternative's count stays above 0 */
        const uint32_t t = queue[--n_queue];
        for (uint32_t u = use_at[t]; u < use_at[t + 1]; u++) {
            const uint32_t a = use_alt[u], r = alt_rule[a];
            if (--left[a] == 0 && !nullable[r]) {
                nullable[r] = true;
                queue[n_queue++] = r;
            }
        }
    }
    rc = 0;
done:
    free(left);
    free(alt_rule);
    free(use_at);
    free(use_alt);
    free(queue);
    return rc;
}

/* Left recursion: rule r reaches itself through the first elements of its alternatives, skipping
 * elements that can match the empty string. The matcher would expand such a rule forever. A depth-first
 * search with a stack of its own (path, and at each depth the element it goes on from), since a chain of
 * rules goes as deep as it is long. */
static int find_left_cycle(const woolly_grammar *g, const bool *nullable, uint8_t *color, uint32_t *path,
                           uint32_t *next, uint32_t r0, woolly_error *err)
{
    /* next[d]: the element of path[d]'s alternatives to look at next, as an index into elems, or the
     * alternative's end once it stops on an element that cannot be empty */
    uint32_t depth = 0;
    path[0] = r0;
    color[r0] = 1;
    uint32_t *alt = next + g->n_rules + 1; /* alt[d]: the alternative of path[d] under way */
    alt[0] = g->rule_alt[r0];
    next[0] = alt[0] < g->rule_alt[r0 + 1] ? g->alt_start[alt[0]] : UINT32_MAX;
    for (;;) {
        const uint32_t r = path[depth];
        uint32_t p = next[depth];
        if (p == UINT32_MAX || GE_KIND(g->elems[p]) != GE_REF) { /* this alternative is done: the next one */
            if (++alt[depth] < g->rule_alt[r + 1]) {
                next[depth] = g->alt_start[alt[depth]];
                continue;
            }
            color[r] = 2;
            if (depth == 0)
                return 0;
            depth--;
            continue;
        }
        const uint32_t s = GE_ARG(g->elems[p]);
        /* past s next time, if s can be empty; else this alternative ends here */
        next[depth] = nullable[s] ? p + 1 : UINT32_MAX;
        if (color[s] == 1) {
            char chain[384] = "";
            size_t n = 0;
            uint32_t from = depth;
            while (path[from] != s)
                from--;
            for (uint32_t i = from; i <= depth && n < sizeof chain - 1; i++)
                n += (size_t)snprintf(chain + n, sizeof chain - n, "%s -> ", g->names[path[i]]);
            if (n < sizeof chain - 1)
                snprintf(chain + n, sizeof chain - n, "%s", g->names[s]);
            return woolly_fail(err,
                               "grammar: rule '%s' is left-recursive (it reaches itself before matching "
                               "a character: %s); rewrite it with repetition",
                               g->names[s], chain);
        }
        if (color[s] == 0) {
            color[s] = 1;
            path[++depth] = s;
            alt[depth] = g->rule_alt[s];
            next[depth] = alt[depth] < g->rule_alt[s + 1] ? g->alt_start[alt[depth]] : UINT32_MAX;
        }
    }
}

static int check_left_recursion(const woolly_grammar *g, woolly_error *err)
{
    bool *nullable = calloc(g->n_rules, sizeof *nullable);
    uint8_t *color = calloc(g->n_rules, 1);
    uint32_t *path = malloc(sizeof *path * (g->n_rules + 1));
    uint32_t *next = malloc(sizeof *next * 2 * (g->n_rules + 1));
    int rc = 0;
    if (!nullable || !color || !path || !next || find_nullable(g, nullable)) {
        rc = woolly_fail(err, "grammar: out of memory");
        goto done;
    }
    for (uint32_t r = 0; r < g->n_rules && !rc; r++)
        if (color[r] == 0)
            rc = find_left_cycle(g, nullable, color, path, next, r, err);
done:
    free(nullable);
    free(color);
    free(path);
    free(next);
    return rc;
}

woolly_grammar *gb_finish(gbuilder *b, const char *root, woolly_error *err)
{
    woolly_grammar *g = NULL;
    if (b->oom) {
        woolly_fail(err, "grammar: out of memory");
        goto fail;
    }
    uint32_t root_id = UINT32_MAX;
    for (uint32_t r = 0; r < b->n_rules; r++) {
        if (!b->rules[r].defined) {
            woolly_fail(err, "grammar: line %u, column %u: rule '%s' is used but never defined", b->rules[r].line,
                        b->rules[r].col, b->rules[r].name);
            goto fail;
        }
        if (!strcmp(b->rules[r].name, root))
            root_id = r;
    }
    if (root_id == UINT32_MAX) {
        woolly_fail(err, "grammar: no rule named '%s' (the start rule)", root);
        goto fail;
    }
    uint32_t n_alts = 0, n_elems = 0;
    for (uint32_t r = 0; r < b->n_rules; r++) {
        n_alts += b->rules[r].n_alts;
        for (uint32_t a = 0; a < b->rules[r].n_alts; a++)
            n_elems += b->rules[r].alts[a].n + 1;
    }
    g = calloc(1, sizeof *g);
    if (!g)
        goto oom;
    atomic_init(&g->refs, 1);
    g->n_rules = b->n_rules;
    g->root = root_id;
    g->elems = malloc(sizeof *g->elems * (n_elems + 1));
    g->alt_start = malloc(sizeof *g->alt_start * (n_alts + 1));
    g->rule_alt = malloc(sizeof *g->rule_alt * (b->n_rules + 1));
    g->names = calloc(b->n_rules, sizeof *g->names);
    if (!g->elems || !g->alt_start || !g->rule_alt || !g->names)
        goto oom;
    uint32_t ai = 0, ei = 0;
    for (uint32_t r = 0; r < b->n_rules; r++) {
        g->rule_alt[r] = ai;
        g->names[r] = b->rules[r].name;
        b->rules[r].name = NULL;
        for (uint32_t a = 0; a < b->rules[r].n_alts; a++) {
            g->alt_start[ai++] = ei;
            if (b->rules[r].alts[a].n) /* an empty alternative has no buffer */
                memcpy(g->elems + ei, b->rules[r].alts[a].e, b->rules[r].alts[a].n * sizeof *g->elems);
            ei += b->rules[r].alts[a].n;
            g->elems[ei++] = GE_END;
        }
    }
    g->rule_alt[b->n_rules] = ai;
    g->elems[ei] = GE_END; /* a guard for the element after the last */
    g->n_elems = ei;
    g->classes = b->classes;
    g->ranges = b->ranges;
    b->classes = NULL;
    b->ranges = NULL;
    gb_free(b);
    if (check_left_recursion(g, err)) {
        woolly_grammar_free(g);
        return NULL;
    }
    return g;
oom:
    woolly_fail(err, "grammar: out of memory");
    woolly_grammar_free(g);
fail:
    gb_free(b);
    return NULL;
}
