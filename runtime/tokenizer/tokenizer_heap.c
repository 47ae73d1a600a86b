#include "tokenizer_heap.h"

#include <stdlib.h>

int woolly_merge_heap_reserve(woolly_merge_heap *h, size_t n_syms, woolly_error *err)
{
    if (n_syms > SIZE_MAX / 3 / sizeof *h->c)
        return woolly_fail(err, "tokenizer: %zu symbols is too many to merge", n_syms);
    size_t need = 3 * n_syms;
    if (need <= h->cap)
        return 0;
    woolly_merge_cand *c = realloc(h->c, need * sizeof *c);
    if (!c)
        return woolly_fail(err, "tokenizer: out of memory for the merges of %zu symbols", n_syms);
    h->c = c;
    h->cap = need;
    return 0;
}

void woolly_merge_heap_free(woolly_merge_heap *h)
{
    free(h->c);
    *h = (woolly_merge_heap){0};
}
