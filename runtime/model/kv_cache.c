#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "kernels.h"

size_t woolly_kv_cache_bytes(enum woolly_type type, int64_t n_ctx, int64_t n_layer, int64_t n_head_kv,
                             int64_t head_dim)
{
    const size_t elem = type == WOOLLY_TYPE_F16 ? 2 : 4;
    return 2 * elem * (size_t)n_ctx * (size_t)n_layer * (size_t)n_head_kv * (size_t)head_dim;
}

int woolly_kv_cache_open(woolly_kv_cache *c, enum woolly_type type, int64_t n_ctx, int64_t n_layer,
                         int64_t n_head_kv, int64_t head_dim, woolly_error *err)
{
    memset(c, 0, sizeof *c);
    if (type != WOOLLY_TYPE_F16 && type != WOOLLY_TYPE_F32)
        return woolly_fail(err, "KV cache: type %d is not F16 or F32", (int)type);
    if (n_ctx < 1 || n_layer < 1 || n_head_kv < 1 || head_dim < 1)
        return woolly_fail(err,
                           "KV cache: bad dimensions (n_ctx %lld, layers %lld, kv heads %lld, head dim %lld)",
                           (long long)n_ctx, (long long)n_layer, (long long)n_head_kv, (long long)head_dim);
    c->type = type;
    c->n_ctx = n_ctx;
    c->n_layer = n_layer;
    c->n_head_kv = n_head_kv;
    c->head_dim = head_dim;
    c->elem_bytes = type == WOOLLY_TYPE_F16 ? 2 : 4;
    c->row_elems = (size_t)(n_head_kv * head_dim);
    const size_t half = woolly_kv_cache_bytes(type, n_ctx, n_layer, n_head_kv, head_dim) / 2;
    /* Zeroed: a kernel never reads an unwritten position, but calloc costs nothing extra for fresh
     * pages and keeps the memory tools quiet. */
    c->k = calloc(1, half);
    c->v = calloc(1, half);
    if (!c->k || !c->v) {
        woolly_kv_cache_close(c);
        return woolly_fail(err,
                           "KV cache: out of memory for %.1f MiB (%lld positions); try a smaller --ctx-size",
                           2.0 * (double)half / (1024.0 * 1024.0), (long long)n_ctx);
    }
    return 0;
}

void woolly_kv_cache_close(woolly_kv_cache *c)
{
    free(c->k);
    free(c->v);
    c->k = c->v = NULL;
}

static size_t offset(const woolly_kv_cache *c, int64_t layer, int64_t pos)
{
    return ((size_t)layer * (size_t)c->n_ctx + (size_t)pos) * c->row_elems * c->elem_bytes;
}

void woolly_kv_cache_store(woolly_kv_cache *c, int64_t layer, int64_t pos, const float *k, const float *v)
{
    const size_t off = offset(c, layer, pos);
    if (c->type == WOOLLY_TYPE_F32) {
        memcpy((char *)c->k + off, k, c->row_elems * sizeof(float));
        memcpy((char *)c->v + off, v, c->row_elems * sizeof(float));
        return;
    }
    uint16_t *kd = (uint16_t *)((char *)c->k + off), *vd = (uint16_t *)((char *)c->v + off);
    for (size_t i = 0; i < c->row_elems; i++) {
        kd[i] = woolly_f32_to_f16(k[i]);
        vd[i] = woolly_f32_to_f16(v[i]);
    }
}

const void *woolly_kv_cache_k(const woolly_kv_cache *c, int64_t layer, int64_t head)
{
    return (const char *)c->k + offset(c, layer, 0) + (size_t)(head * c->head_dim) * c->elem_bytes;
}

const void *woolly_kv_cache_v(const woolly_kv_cache *c, int64_t layer, int64_t head)
{
    return (const char *)c->v + offset(c, layer, 0) + (size_t)(head * c->head_dim) * c->elem_bytes;
}
