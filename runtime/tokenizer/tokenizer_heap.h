/* The priority queue of candidate merges shared by the SPM and BPE encoders: a binary min-heap of
 * adjacent symbol pairs, lowest key first and the leftmost pair among equal keys. A queued pair may go
 * stale when a neighbour merges first; the encoders skip those on pop by comparing the tags. */
#ifndef WOOLLY_TOKENIZER_HEAP_H
#define WOOLLY_TOKENIZER_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct woolly_merge_cand {
    double key;          /* BPE: the merge rank; SPM: minus the merged piece's score (exact for both) */
    int32_t left, right; /* symbol indices (= position order) of the pair */
    int32_t merged;      /* the token the pair becomes */
    /* What each side was when the pair was queued (BPE: token ids; SPM: byte lengths). */
    uint32_t left_tag, right_tag;
} woolly_merge_cand;

typedef struct woolly_merge_heap {
    woolly_merge_cand *c;
    size_t n, cap;
} woolly_merge_heap;

/* Makes room for the pairs of a text of up to n_syms symbols: each merge queues at most two new
 * pairs, so 3 * n_syms is never exceeded. */
int woolly_merge_heap_reserve(woolly_merge_heap *h, size_t n_syms, woolly_error *err);
void woolly_merge_heap_free(woolly_merge_heap *h);

/* Push needs room (reserve); pop needs a non-empty heap. Inline: they are the encoders' inner loop. */
static inline int woolly_merge_cand_before(const woolly_merge_cand *x, const woolly_merge_cand *y)
{
    return x->key < y->key || (x->key == y->key && x->left < y->left);
}

static inline void woolly_merge_heap_push(woolly_merge_heap *h, woolly_merge_cand c)
{
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!woolly_merge_cand_before(&c, &h->c[parent]))
            break;
        h->c[i] = h->c[parent];
        i = parent;
    }
    h->c[i] = c;
}

static inline woolly_merge_cand woolly_merge_heap_pop(woolly_merge_heap *h)
{
    woolly_merge_cand top = h->c[0], last = h->c[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && woolly_merge_cand_before(&h->c[c + 1], &h->c[c]))
            c++;
        if (!woolly_merge_cand_before(&h->c[c], &last))
            break;
        h->c[i] = h->c[c];
        i = c;
    }
    if (n > 0)
        h->c[i] = last;
    return top;
}

#endif
