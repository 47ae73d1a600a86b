/* Private to the GGUF reader: the parser's allocations (freed together by gguf_close) and the hash
 * indexes that find duplicate keys / tensor names in linear time and serve gguf_find_kv/_tensor. */
#ifndef WOOLLY_GGUF_ARENA_H
#define WOOLLY_GGUF_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct gguf_index gguf_index;

typedef struct gguf_arena {
    struct gguf_arena_block *blocks;
    gguf_index *kv_index;
    gguf_index *tensor_index;
} gguf_arena;

gguf_arena *gguf_arena_new(void);
/* Zeroed memory that lives until gguf_arena_free; NULL if out of memory (or n == 0). */
void *gguf_arena_alloc(gguf_arena *a, size_t n);
void gguf_arena_free(gguf_arena *a);

#define GGUF_INDEX_NONE ((size_t)-1)

/* The index stores entry numbers; it asks `key_of(items, i)` for entry i's name. */
typedef void (*gguf_index_key_fn)(const void *items, size_t i, const char **ptr, uint64_t *len);

/* An index for up to `capacity` entries. */
gguf_index *gguf_index_new(gguf_arena *a, uint64_t capacity);
/* Adds entry i under name (ptr, len); if the name is already present, returns the earlier entry's
 * number and adds nothing; GGUF_INDEX_NONE otherwise. */
size_t gguf_index_insert(gguf_index *ix, const char *ptr, uint64_t len, size_t i, gguf_index_key_fn key_of,
                         const void *items);
/* The entry named (ptr, len), or GGUF_INDEX_NONE. */
size_t gguf_index_find(const gguf_index *ix, const char *ptr, uint64_t len, gguf_index_key_fn key_of,
                       const void *items);

/* key_of for a gguf_kv array and a gguf_tensor array. */
void gguf_index_key_of_kv(const void *items, size_t i, const char **ptr, uint64_t *len);
void gguf_index_key_of_tensor(const void *items, size_t i, const char **ptr, uint64_t *len);

#endif
