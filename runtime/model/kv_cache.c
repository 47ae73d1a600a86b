#include "kv_cache.h"

#include <pthread.h>
#include <stdbool.h>
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

/* Bytes of the K (or V) half of the cache: every sequence's positions. */
static size_t half_bytes(const woolly_kv_cache *c)
{
    return woolly_kv_cache_bytes(c->type, c->n_ctx, c->n_layer, c->n_head_kv, c->head_dim) / 2 * (size_t)c->n_seq;
}

int woolly_kv_cache_open(woolly_kv_cache *c, enum woolly_type type, int64_t n_ctx, int64_t n_seq,
                         int64_t n_layer, int64_t n_head_kv, int64_t head_dim, woolly_error *err)
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
    if (type == WOOLLY_TYPE_F16) {
        const woolly_kernel *pk = woolly_kernel_choose_pack(WOOLLY_ACT_F16);
        if (!pk)
            return woolly_fail(err, "KV cache: no F16 packer in the kernel registry");
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
        return woolly_fail(err,
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
}

static size_t offset(const woolly_kv_cache *c, int64_t layer, int64_t seq, int64_t head, int64_t pos)
{
    const size_t stream =
        ((size_t)layer * (size_t)c->n_seq + (size_t)seq) * (size_t)c->n_head_kv + (size_t)head;
    return (stream * (size_t)c->n_ctx + (size_t)pos) * c->head_bytes;
}

void woolly_kv_cache_store(woolly_kv_cache *c, int64_t layer, int64_t seq, int64_t pos, const float *k,
                           const float *v)
{
    const int64_t n = c->head_dim;
    for (int64_t h = 0; h < c->n_head_kv; h++, k += n, v += n) {
        const size_t at = offset(c, layer, seq, h, pos);
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

void woolly_kv_cache_copy(woolly_kv_cache *c, int64_t src, int64_t dst, int64_t n)
{
    const size_t bytes = (size_t)n * c->head_bytes; /* one head's stream is contiguous in positions */
    for (int64_t l = 0; l < c->n_layer; l++)
        for (int64_t h = 0; h < c->n_head_kv; h++) {
            const size_t from = offset(c, l, src, h, 0), to = offset(c, l, dst, h, 0);
            memcpy((char *)c->k + to, (const char *)c->k + from, bytes);
            memcpy((char *)c->v + to, (const char *)c->v + from, bytes);
        }
}

const void *woolly_kv_cache_k(const woolly_kv_cache *c, int64_t layer, int64_t seq, int64_t head)
{
    return (const char *)c->k + offset(c, layer, seq, head, 0);
}

const void *woolly_kv_cache_v(const woolly_kv_cache *c, int64_t layer, int64_t seq, int64_t head)
{
    return (const char *)c->v + offset(c, layer, seq, head, 0);
}
