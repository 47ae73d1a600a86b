/* The vocabulary's string -> id map: built once when the tokenizer loads, probed by the loader and by
 * both encoders. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

static uint64_t str_hash(const char *s, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, s, n);
    h = (h ^ v) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

int32_t woolly_vocab_lookup(const woolly_tokenizer *t, const char *s, size_t n)
{
    const woolly_str_map *m = &t->map;
    uint64_t h = str_hash(s, n), tag = h >> 32;
    for (uint32_t i = (uint32_t)h & m->mask;; i = (i + 1) & m->mask) {
        uint64_t slot = m->slots[i];
        if (slot == 0)
            return -1;
        if (slot >> 32 != tag)
            continue;
        int32_t id = (int32_t)(uint32_t)slot - 1;
        size_t len;
        const char *p = woolly_token_text(t, id, &len);
        if (len == n && memcmp(p, s, n) == 0)
            return id;
    }
}

int woolly_vocab_build_map(woolly_tokenizer *t, woolly_error *err)
{
    uint32_t cap = 16;
    while (cap < (uint32_t)t->n_vocab * 2u)
        cap *= 2;
    t->map.slots = calloc(cap, sizeof *t->map.slots);
    if (!t->map.slots)
        return woolly_fail(err, "tokenizer: out of memory for %d tokens", t->n_vocab);
    t->map.mask = cap - 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        size_t n;
        const char *s = woolly_token_text(t, id, &n);
        if (woolly_vocab_lookup(t, s, n) >= 0)
            continue; /* a repeated string keeps its first id */
        uint64_t h = str_hash(s, n);
        uint32_t i = (uint32_t)h & t->map.mask;
        while (t->map.slots[i] != 0)
            i = (i + 1) & t->map.mask;
        t->map.slots[i] = (h >> 32) << 32 | (uint32_t)(id + 1);
    }
    return 0;
}
