/* The KV cache: the keys and values of every layer for positions [0, n_ctx), in F16 (default) or F32.
 *
 * Layout, per layer and for K and V alike: [position][kv head][head_dim], so that one position of all
 * heads is one contiguous row of n_head_kv * head_dim elements (what a token's K/V projection yields),
 * and one head's positions are kv_stride = n_head_kv * head_dim elements apart (what an attention
 * kernel walks). Allocated once; storing past n_ctx is refused by the caller's bounds check. */
#ifndef WOOLLY_KV_CACHE_H
#define WOOLLY_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "wtype.h"

typedef struct woolly_kv_cache {
    enum woolly_type type; /* WOOLLY_TYPE_F16 or WOOLLY_TYPE_F32 */
    int64_t n_ctx, n_layer, n_head_kv, head_dim;
    size_t elem_bytes;
    size_t row_elems; /* n_head_kv * head_dim: one position of one layer */
    void *k, *v;      /* [n_layer][n_ctx][n_head_kv][head_dim] */
} woolly_kv_cache;

/* Bytes the cache of these dimensions takes (K and V). */
size_t woolly_kv_cache_bytes(enum woolly_type type, int64_t n_ctx, int64_t n_layer, int64_t n_head_kv,
                             int64_t head_dim);

int woolly_kv_cache_open(woolly_kv_cache *c, enum woolly_type type, int64_t n_ctx, int64_t n_layer,
                         int64_t n_head_kv, int64_t head_dim, woolly_error *err);
void woolly_kv_cache_close(woolly_kv_cache *c);

/* Stores the K and V rows (row_elems floats each) of one position of one layer, converting to the cache
 * type. pos must be < n_ctx (checked by the forward pass before anything is evaluated). */
void woolly_kv_cache_store(woolly_kv_cache *c, int64_t layer, int64_t pos, const float *k, const float *v);

/* Start of head h's keys / values of a layer (position 0), for the attention kernels. */
const void *woolly_kv_cache_k(const woolly_kv_cache *c, int64_t layer, int64_t head);
const void *woolly_kv_cache_v(const woolly_kv_cache *c, int64_t layer, int64_t head);

#endif
