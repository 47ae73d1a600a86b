/* The KV cache: the keys and values of every layer for positions [0, n_ctx) of each of n_seq sequences
 * (a region of n_ctx positions per sequence, so that sequences never share or fragment space and a
 * cleared sequence's region is reusable at once), in F16 (default), F32 or
 * Q8_0 (blocks of 32 values along the head dimension with an F16 scale, as llama.cpp's quantized cache;
 * half the memory of F16, the head dimension a multiple of 32).
 *
 * A sliding-window layer (window W > 0: a token sees itself and the W - 1 positions before it) holds only
 * a ring of its latest positions, position p in row p % ring: ring = W - 1 + n_batch rounded up to a
 * multiple of WOOLLY_ATTN_RING_ALIGN. A forward pass stores all of a batch's tokens before its attention,
 * so the ring must still hold the window of the batch's first token after its last one is stored: W - 1
 * positions before the first, and the n_batch of the batch. The rounding keeps a ring's end on every
 * kernel's KV block grid. (A ring at least n_ctx long is no ring: the layer keeps all n_ctx positions.)
 * So a long context costs the global layers' cache only. A ring that has gone past positions a
 * sequence would need again cannot give them back: woolly_kv_cache_holds says whether the sequence can go
 * on from position n (a rewind or a copy of its first n positions), and the caller recomputes when not.
 *
 * Layout, per layer and for K and V alike: [sequence][kv head][position or ring row][head_dim in the cache
 * type], so that one KV head's positions are one contiguous stream of head_bytes rows (what an attention
 * kernel walks: a decode thread reading one head reads nothing but that head, and the hardware prefetcher
 * sees one sequential stream); storing a token scatters its heads' rows to n_head_kv places. Allocated
 * once; storing past n_ctx is refused by the caller's bounds check. */
#ifndef WOOLLY_KV_CACHE_H
#define WOOLLY_KV_CACHE_H

#include <stdbool.h>
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
    int64_t *window;              /* [n_layer] 0: a global layer; else its sliding window */
    int64_t *ring;                /* [n_layer] 0: n_ctx positions; else the ring's rows */
    size_t *layer_at;             /* [n_layer] byte offset of the layer's K (and V) rows */
    int64_t *kept_from;           /* [n_seq][n_layer] a ring's lowest position still held */
} woolly_kv_cache;

/* Rows of a layer's ring for its window (0: the layer is global, or its ring would not be shorter than
 * n_ctx, and it keeps n_ctx positions). n_batch: the most tokens one forward pass stores for a sequence. */
int64_t woolly_kv_ring_rows(int64_t window, int64_t n_ctx, int64_t n_batch);

/* Bytes the cache of these dimensions takes (K and V) per sequence of n_ctx positions, every layer global;
 * 0 if the type cannot hold heads of head_dim. */
size_t woolly_kv_cache_bytes(enum woolly_type type, int64_t n_ctx, int64_t n_layer, int64_t n_head_kv,
                             int64_t head_dim);
/* The same with layer l's sliding window window[l] (0: global; window NULL: every layer global): its
 * ring's rows (woolly_kv_ring_rows) in place of n_ctx. */
size_t woolly_kv_cache_bytes_swa(enum woolly_type type, int64_t n_ctx, int64_t n_batch, int64_t n_layer,
                                 const int32_t *window, int64_t n_head_kv, int64_t head_dim);

/* Every layer global. */
int woolly_kv_cache_open(woolly_kv_cache *c, enum woolly_type type, int64_t n_ctx, int64_t n_seq,
                         int64_t n_layer, int64_t n_head_kv, int64_t head_dim, woolly_error *err);
/* Layer l slides with window[l] (0: global; NULL: none slides), holding a ring of its positions;
 * n_batch: the most tokens one forward pass stores for a sequence. */
int woolly_kv_cache_open_swa(woolly_kv_cache *c, enum woolly_type type, int64_t n_ctx, int64_t n_seq,
                             int64_t n_batch, int64_t n_layer, const int32_t *window, int64_t n_head_kv,
                             int64_t head_dim, woolly_error *err);
/* Bytes of this cache's K and V, every sequence. */
size_t woolly_kv_cache_total_bytes(const woolly_kv_cache *c);
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

/* Whether a sequence can go on from position n (n <= what it has stored): every ring still holds the
 * positions the token at n sees (its window's n - W + 1 .. n - 1). Always for n = 0, and without rings. */
bool woolly_kv_cache_holds(const woolly_kv_cache *c, int64_t seq, int64_t n);

/* The sequence goes on from position n (woolly_kv_cache_holds(c, seq, n)): the rows past n are stale and
 * are written before they are read again; n = 0 forgets what the rings held. */
void woolly_kv_cache_rewind(woolly_kv_cache *c, int64_t seq, int64_t n);

/* Copies positions [0, n) of sequence src into sequence dst, every layer and head, K and V (src != dst,
 * n <= n_ctx and n <= what src has stored): the rows of a shared beginning, which depend only on the tokens
 * up to them; of a ring, the whole ring. Returns -1, copying nothing, when src's rings no longer hold what
 * dst would see from n (woolly_kv_cache_holds): the caller recomputes. */
int woolly_kv_cache_copy(woolly_kv_cache *c, int64_t src, int64_t dst, int64_t n);

/* The ring rows of a layer (0: position p is row p) and its window (0: global), for the attention
 * kernels' woolly_attn_args. */
static inline int64_t woolly_kv_cache_ring(const woolly_kv_cache *c, int64_t layer)
{
    return c->ring[layer];
}
static inline int64_t woolly_kv_cache_window(const woolly_kv_cache *c, int64_t layer)
{
    return c->window[layer];
}

/* Start of head h's keys / values of a sequence in a layer (position 0, or a ring's row 0), for the
 * attention kernels: position p at + p * head_bytes, in a ring at + (p % ring) * head_bytes. */
const void *woolly_kv_cache_k(const woolly_kv_cache *c, int64_t layer, int64_t seq, int64_t head);
const void *woolly_kv_cache_v(const woolly_kv_cache *c, int64_t layer, int64_t seq, int64_t head);

#endif
