/* The KV cache: the keys and values of every layer for positions [0, n_ctx) of each of n_seq sequences
 * (a region of n_ctx positions per sequence, so that sequences never share or fragment space and a
 * cleared sequence's region is reusable at once), in F16 (default), F32 or
 * Q8_0 (blocks of 32 values along the head dimension with an F16 scale, as llama.cpp's quantized cache;
 * half the memory of F16, the head dimension a multiple of 32).
 *
 * Layout, per layer and for K and V alike: [sequence][kv head][position][head_dim in the cache type], so
 * that one KV head's positions are one contiguous stream of head_bytes rows (what an attention kernel
 * walks: a decode thread reading one head reads nothing but that head, and the hardware prefetcher sees
 * one sequential stream); storing a token scatters its heads' rows to n_head_kv places. Allocated once;
 * storing past n_ctx is refused by the caller's bounds check. */
#ifndef WOOLLY_KV_CACHE_H
#define WOOLLY_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "huge_map.h"
#include "kernels.h"
#include "wtype.h"

typedef struct woolly_kv_cache {
    enum woolly_type type; /* WOOLLY_TYPE_F16, WOOLLY_TYPE_F32 or WOOLLY_TYPE_Q8_0 */
    int64_t n_ctx, n_seq, n_layer, n_head_kv, head_dim; /* n_ctx: positions per sequence */
    size_t head_bytes; /* one head's head_dim values in the cache type: the kernels' kv_row_bytes */
    void *k, *v;       /* [n_layer][n_seq][n_head_kv][n_ctx][head_bytes] */
    woolly_huge_map k_map, v_map; /* the memory of k and v */
    woolly_pack_fn to_f16;        /* the F16 packer of the active level, for an F16 cache */
} woolly_kv_cache;

/* Bytes the cache of these dimensions takes (K and V) per sequence of n_ctx positions; 0 if the type
 * cannot hold heads of head_dim. */
size_t woolly_kv_cache_bytes(enum woolly_type type, int64_t n_ctx, int64_t n_layer, int64_t n_head_kv,
                             int64_t head_dim);

int woolly_kv_cache_open(woolly_kv_cache *c, enum woolly_type type, int64_t n_ctx, int64_t n_seq,
                         int64_t n_layer, int64_t n_head_kv, int64_t head_dim, woolly_error *err);
/* Commits the whole cache's memory now (it is otherwise committed as positions are first written): for
 * a server, whose slots would each pay for their pages on their first requests. A clear error when the
 * memory is not there. */
int woolly_kv_cache_populate(woolly_kv_cache *c, woolly_error *err);
void woolly_kv_cache_close(woolly_kv_cache *c);

/* Stores the K and V rows (n_head_kv * head_dim floats each) of one position of one sequence of one
 * layer, converting to the cache type. seq < n_seq and pos < n_ctx (checked before anything is
 * evaluated). */
void woolly_kv_cache_store(woolly_kv_cache *c, int64_t layer, int64_t seq, int64_t pos, const float *k,
                           const float *v);

/* Copies positions [0, n) of sequence src into sequence dst, every layer and head, K and V (src != dst,
 * n <= n_ctx): the rows of a shared beginning, which depend only on the tokens up to them. */
void woolly_kv_cache_copy(woolly_kv_cache *c, int64_t src, int64_t dst, int64_t n);

/* Start of head h's keys / values of a sequence in a layer (position 0), for the attention kernels:
 * position p at + p * head_bytes. */
const void *woolly_kv_cache_k(const woolly_kv_cache *c, int64_t layer, int64_t seq, int64_t head);
const void *woolly_kv_cache_v(const woolly_kv_cache *c, int64_t layer, int64_t seq, int64_t head);

#endif
