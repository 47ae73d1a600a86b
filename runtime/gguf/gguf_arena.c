#include "gguf_arena.h"

#include <stdlib.h>
#include <string.h>

#include "gguf.h"

struct gguf_arena_block {
    struct gguf_arena_block *next;
    max_align_t data[]; /* aligned for anything */
};

struct gguf_index {
    size_t mask;   /* slots - 1; slots is a power of two at least twice the capacity */
    size_t *slots; /* entry number + 1; 0 = empty */
};

gguf_arena *gguf_arena_new(void)
{
    return calloc(1, sizeof(gguf_arena));
}

void *gguf_arena_alloc(gguf_arena *a, size_t n)
{
    if (n == 0 || n > SIZE_MAX - sizeof(struct gguf_arena_block))
        return NULL;
    struct gguf_arena_block *b = calloc(1, sizeof *b + n);
    if (!b)
        return NULL;
    b->next = a->blocks;
    a->blocks = b;
    return b->data;
}

void gguf_arena_free(gguf_arena *a)
{
    if (!a)
        return;
    for (struct gguf_arena_block *b = a->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(a);
}

/* FNV-1a, then a final avalanche (MurmurHash3's fmix64) so that the low bits the table uses depend on
 * every byte: names crafted to collide in the low bits of plain FNV would otherwise make the
 * duplicate check quadratic. */
static uint64_t hash_name(const char *p, uint64_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

gguf_index *gguf_index_new(gguf_arena *a, uint64_t capacity)
{
    size_t slots = 8;
    while (slots < 2 * capacity) {
        if (slots > SIZE_MAX / 2 / sizeof(size_t))
            return NULL;
        slots *= 2;
    }
    gguf_index *ix = gguf_arena_alloc(a, sizeof *ix);
    if (!ix)
        return NULL;
    ix->slots = gguf_arena_alloc(a, slots * sizeof(size_t));
    if (!ix->slots)
        return NULL;
    ix->mask = slots - 1;
    return ix;
}

/* The slot holding (ptr, len), or the empty slot where it would go. */
static size_t probe(const gguf_index *ix, const char *ptr, uint64_t len, gguf_index_key_fn key_of,
                    const void *items)
{
    size_t s = (size_t)hash_name(ptr, len) & ix->mask;
    for (;; s = (s + 1) & ix->mask) {
        if (ix->slots[s] == 0)
            return s;
        const char *kp;
        uint64_t kl;
        key_of(items, ix->slots[s] - 1, &kp, &kl);
        if (kl == len && memcmp(kp, ptr, (size_t)len) == 0)
            return s;
    }
}

size_t gguf_index_insert(gguf_index *ix, const char *ptr, uint64_t len, size_t i, gguf_index_key_fn key_of,
                         const void *items)
{
    size_t s = probe(ix, ptr, len, key_of, items);
    if (ix->slots[s] != 0)
        return ix->slots[s] - 1;
    ix->slots[s] = i + 1;
    return GGUF_INDEX_NONE;
}

size_t gguf_index_find(const gguf_index *ix, const char *ptr, uint64_t len, gguf_index_key_fn key_of,
                       const void *items)
{
    size_t s = probe(ix, ptr, len, key_of, items);
    return ix->slots[s] == 0 ? GGUF_INDEX_NONE : ix->slots[s] - 1;
}

void gguf_index_key_of_kv(const void *items, size_t i, const char **ptr, uint64_t *len)
{
    const gguf_kv *kv = (const gguf_kv *)items + i;
    *ptr = kv->key.ptr;
    *len = kv->key.len;
}

void gguf_index_key_of_tensor(const void *items, size_t i, const char **ptr, uint64_t *len)
{
    const gguf_tensor *t = (const gguf_tensor *)items + i;
    *ptr = t->name;
    *len = strlen(t->name);
}
