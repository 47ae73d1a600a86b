#include "kv_cache.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "registry.h"

size_t woolly_kv_cache_bytes(enum woolly_type type, int64_t n_ctx, int64_t n_layer, int64_t n_head_kv,
                             int64_t head_dim)
{
    if (type != WOOLLY_TYPE_F16 && type != WOOLLY_TYPE_F32 && type != WOOLLY_TYPE_Q8_0)
        return 0;
    return 2 * woolly_row_bytes(type, head_dim) * (size_t)n_ctx * (size_t)n_layer * (size_t)n_head_kv;
}

int64_t woolly_kv_ring_rows(int64_t window, int64_t n_ctx, int64_t n_batch)
{
    if (window <= 0)
        return 0;
    const int64_t need = window - 1 + (n_batch > 1 ? n_batch : 1);
    const int64_t rows =
        (need + WOOLLY_ATTN_RING_ALIGN - 1) / WOOLLY_ATTN_RING_ALIGN * WOOLLY_ATTN_RING_ALIGN;
    return rows < n_ctx ? rows : 0;
}

/* Positions a layer keeps per sequence and head. */
static int64_t layer_rows(int64_t window, int64_t n_ctx, int64_t n_batch)
{
    const int64_t ring = woolly_kv_ring_rows(window, n_ctx, n_batch);
    return ring ? ring : n_ctx;
}

size_t woolly_kv_cache_bytes_swa(enum woolly_type type, int64_t n_ctx, int64_t n_batch, int64_t n_layer,
                                 const int32_t *window, int64_t n_head_kv, int64_t head_dim)
{
    size_t bytes = 0;
    for (int64_t l = 0; l < n_layer; l++)
        bytes += woolly_kv_cache_bytes(type, layer_rows(window ? window[l] : 0, n_ctx, n_batch), 1, n_head_kv,
                                       head_dim);
    return bytes;
}

/* Bytes of the K (or V) half of the cache: every layer's, every sequence's positions. */
static size_t half_bytes(const woolly_kv_cache *c)
{
    size_t rows = 0;
    for (int64_t l = 0; l < c->n_layer; l++)
        rows += (size_t)(c->ring[l] ? c->ring[l] : c->n_ctx);
    return rows * (size_t)c->n_seq * (size_t)c->n_head_kv * c->head_bytes;
}

size_t woolly_kv_cache_total_bytes(const woolly_kv_cache *c)
{
    return 2 * half_bytes(c);
}

int woolly_kv_cache_open(woolly_kv_cache *c, enum woolly_type type, int64_t n_ctx, int64_t n_seq,
                         int64_t n_layer, int64_t n_head_kv, int64_t head_dim, woolly_error *err)
{
    return woolly_kv_cache_open_swa(c, type, n_ctx, n_seq, 1, n_layer, NULL, n_head_kv, head_dim, err);
}

int woolly_kv_cache_open_swa(woolly_kv_cache *c, enum woolly_type type, int64_t n_ctx, int64_t n_seq,
                             int64_t n_batch, int64_t n_layer, const int32_t *window, int64_t n_head_kv,
                             int64_t head_dim, woolly_error *err)
{
    memset(c, 0, sizeof *c);
    if (type != WOOLLY_TYPE_F16 && type != WOOLLY_TYPE_F32 && type != WOOLLY_TYPE_Q8_0)
        return woolly_fail(err, "KV cache: type %d is not F16, F32 or Q8_0", (int)type);
    if (n_ctx < 1 || n_seq < 1 || n_layer < 1 || n_head_kv < 1 || head_dim < 1)
        return woolly_fail(err,
                           "KV cache: bad dimensions (n_ctx %lld, sequences %lld, layers %lld, kv heads "
                           "%lld, head dim %lld)",
                           (long long)n_ctx, (long long)n_seq, (long long)n_layer, (long long)n_head_kv,
                           (long long)head_dim);
    if (type == WOOLLY_TYPE_Q8_0 && head_dim % WOOLLY_QK8_0)
        return woolly_fail(
            err,
            "KV cache: a Q8_0 cache needs a head dimension that is a multiple of %d (this model's "
            "is %lld); use --kv-type f16",
            WOOLLY_QK8_0, (long long)head_dim);
    c->type = type;
    c->n_ctx = n_ctx;
    c->n_seq = n_seq;
    c->n_layer = n_layer;
    c->n_head_kv = n_head_kv;
    c->head_dim = head_dim;
    c->head_bytes = woolly_row_bytes(type, head_dim);
    c->window = calloc((size_t)n_layer, sizeof *c->window);
    c->ring = calloc((size_t)n_layer, sizeof *c->ring);
    c->layer_at = calloc((size_t)n_layer, sizeof *c->layer_at);
    c->kept_from = calloc((size_t)(n_layer * n_seq), sizeof *c->kept_from);
    if (!c->window || !c->ring || !c->layer_at || !c->kept_from) {
        woolly_kv_cache_close(c);
        return woolly_fail(err, "KV cache: out of memory");
    }
    size_t at = 0;
    for (int64_t l = 0; l < n_layer; l++) {
        c->window[l] = window && window[l] > 0 ? window[l] : 0;
        c->ring[l] = woolly_kv_ring_rows(c->window[l], n_ctx, n_batch);
        c->layer_at[l] = at;
        at += (size_t)(c->ring[l] ? c->ring[l] : n_ctx) * (size_t)n_seq * (size_t)n_head_kv * c->head_bytes;
    }
    if (type == WOOLLY_TYPE_F16) {
        const woolly_kernel *pk = woolly_kernel_choose_pack(WOOLLY_ACT_F16);
        if (!pk) {
            woolly_kv_cache_close(c);
            return woolly_fail(err, "KV cache: no F16 packer in the kernel registry");
        }
        c->to_f16 = pk->pack;
    }
    const size_t half = half_bytes(c);
    /* Huge pages: every decode step streams the cache's filled part from DRAM. Zeroed: a kernel never
     * reads an unwritten position, but fresh anonymous pages cost nothing to zero and keep the memory
     * tools quiet. */
    c->k = woolly_huge_map_open(&c->k_map, half);
    c->v = woolly_huge_map_open(&c->v_map, half);
    if (!c->k || !c->v) {
        woolly_kv_cache_close(c);
        return woolly_fail(err,
                           "KV cache: out of memory for %.1f MiB (%lld sequences of %lld positions); try a "
                           "smaller --ctx-size",
                           2.0 * (double)half / (1024.0 * 1024.0), (long long)n_seq, (long long)n_ctx);
    }
    return 0;
}

typedef struct {
    void *start;
    size_t bytes;
    int rc;
} populate_job;

static void *populate_main(void *arg)
{
    populate_job *j = arg;
    j->rc = woolly_huge_map_populate(j->start, j->bytes);
    return NULL;
}

int woolly_kv_cache_populate(woolly_kv_cache *c, woolly_error *err)
{
    const size_t half = half_bytes(c);
    /* K on a second thread while this one does V: the kernel zeroes the pages, and two cores do it
     * in about half the time (a large server cache takes seconds). */
    populate_job k = {c->k, half, -1};
    pthread_t t;
    const bool threaded = pthread_create(&t, NULL, populate_main, &k) == 0;
    if (!threaded)
        populate_main(&k);
    const int rc_v = woolly_huge_map_populate(c->v, half);
    if (threaded)
        pthread_join(t, NULL);
    if (k.rc || rc_v)
        return woolly_fail(
            err,
            "KV cache: the system cannot provide %.1f MiB for %lld sequences of %lld positions; "
            "try a smaller --ctx-size or fewer --parallel slots",
            2.0 * (double)half / (1024.0 * 1024.0), (long long)c->n_seq, (long long)c->n_ctx);
    return 0;
}

void woolly_kv_cache_close(woolly_kv_cache *c)
{
    woolly_huge_map_close(&c->k_map);
    woolly_huge_map_close(&c->v_map);
    c->k = c->v = NULL;
    free(c->window), free(c->ring), free(c->layer_at), free(c->kept_from);
    c->window = c->ring = c->kept_from = NULL;
    c->layer_at = NULL;
}

/* Rows per sequence and head of a layer. */
static int64_t rows_of(const woolly_kv_cache *c, int64_t layer)
{
    return c->ring[layer] ? c->ring[layer] : c->n_ctx;
}

/* Byte offset of row `row` (a position, or a ring's row) of a head's stream. */
static size_t offset(const woolly_kv_cache *c, int64_t layer, int64_t seq, int64_t head, int64_t row)
{
    const size_t stream = (size_t)seq * (size_t)c->n_head_kv + (size_t)head;
    return c->layer_at[layer] + (stream * (size_t)rows_of(c, layer) + (size_t)row) * c->head_bytes;
}

void woolly_kv_cache_store(woolly_kv_cache *c, int64_t layer, int64_t seq, int64_t pos, const float *k,
                           const float *v)
{
    const int64_t n = c->head_dim, ring = c->ring[layer];
    if (ring) { /* the row of position pos - ring is overwritten */
        int64_t *kept = &c->kept_from[seq * c->n_layer + layer];
        *kept = pos + 1 - ring > *kept ? pos + 1 - ring : *kept;
    }
    for (int64_t h = 0; h < c->n_head_kv; h++, k += n, v += n) {
        const size_t at = offset(c, layer, seq, h, ring ? pos % ring : pos);
        char *kd = (char *)c->k + at, *vd = (char *)c->v + at;
        switch (c->type) {
        case WOOLLY_TYPE_F32:
            memcpy(kd, k, (size_t)n * sizeof(float));
            memcpy(vd, v, (size_t)n * sizeof(float));
            break;
        case WOOLLY_TYPE_F16:
            c->to_f16(k, n, kd);
            c->to_f16(v, n, vd);
            break;
        default: /* Q8_0: the head dimension is whole blocks of 32 */
            woolly_quantize_row(c->type, k, kd, n);
            woolly_quantize_row(c->type, v, vd, n);
            break;
        }
    }
}

bool woolly_kv_cache_holds(const woolly_kv_cache *c, int64_t seq, int64_t n)
{
    for (int64_t l = 0; l < c->n_layer; l++)
        if (c->ring[l] && n > 0) {
            const int64_t first =
                n - c->window[l] + 1 > 0 ? n - c->window[l] + 1 : 0; /* the token at n sees */
            if (first < c->kept_from[seq * c->n_layer + l])
                return false;
        }
    return true;
}

void woolly_kv_cache_rewind(woolly_kv_cache *c, int64_t seq, int64_t n)
{
    if (n == 0)
        for (int64_t l = 0; l < c->n_layer; l++)
            c->kept_from[seq * c->n_layer + l] = 0;
}

int woolly_kv_cache_copy(woolly_kv_cache *c, int64_t src, int64_t dst, int64_t n)
{
    if (!woolly_kv_cache_holds(c, src, n))
        return -1;
    for (int64_t l = 0; l < c->n_layer; l++) {
        /* one head's stream is contiguous in positions; a ring goes whole, its rows past n stale for dst */
        const size_t bytes = (size_t)(c->ring[l] ? c->ring[l] : n) * c->head_bytes;
        for (int64_t h = 0; h < c->n_head_kv; h++) {
            const size_t from = offset(c, l, src, h, 0), to = offset(c, l, dst, h, 0);
            memcpy((char *)c->k + to, (const char *)c->k + from, bytes);
            memcpy((char *)c->v + to, (const char *)c->v + from, bytes);
        }
        c->kept_from[dst * c->n_layer + l] = n > 0 ? c->kept_from[src * c->n_layer + l] : 0;
    }
    return 0;
}

const void *woolly_kv_cache_k(const woolly_kv_cache *c, int64_t layer, int64_t seq, int64_t head)
{
    return (const char *)c->k + offset(c, layer, seq, head, 0);
}

const void *woolly_kv_cache_v(const woolly_kv_cache *c, int64_t layer, int64_t seq, int64_t head)
{
    return (const char *)c->v + offset(c, layer, seq, head, 0);
}
