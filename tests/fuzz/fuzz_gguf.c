/* libFuzzer target for the GGUF parser. Any input must either fail with a message or parse into a
 * structure whose every pointer lies inside the input; the target reads everything the parser handed
 * out (so ASan sees any pointer past the buffer) and checks the invariants gguf.h promises. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

static volatile uint8_t sink;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_gguf: invariant violated: %s\n", what);
        abort();
    }
}

static int inside(const gguf_file *g, const void *p, uint64_t n)
{
    const uint8_t *b = p;
    return b >= g->buf && (size_t)(b - g->buf) <= g->size && n <= g->size - (size_t)(b - g->buf);
}

static void touch(const gguf_file *g, const void *p, uint64_t n)
{
    check(inside(g, p, n), "pointer outside the buffer");
    for (uint64_t i = 0; i < n; i++)
        sink ^= ((const uint8_t *)p)[i];
}

static void walk_array(const gguf_file *g, const gguf_array *a)
{
    switch (a->type) {
    case GGUF_STRING:
        for (uint64_t i = 0; i < a->n; i++)
            touch(g, a->strs[i].ptr, a->strs[i].len);
        break;
    case GGUF_ARRAY:
        for (uint64_t i = 0; i < a->n; i++)
            walk_array(g, &a->items[i].v.arr);
        break;
    default:
        if (a->n > 0) {
            sink ^= (uint8_t)gguf_arr_i64(a, 0);
            double x = gguf_arr_f64(a, a->n - 1); /* may be anything, NaN included */
            sink ^= (uint8_t)(x > 0);
        }
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    woolly_error err = {{0}};
    gguf_file *g = gguf_parse(data, size, &err);
    if (!g) {
        check(err.msg[0] != 0, "failure without a message");
        return 0;
    }
    check(g->version == 2 || g->version == 3, "version");
    check(g->alignment && !(g->alignment & (g->alignment - 1)), "alignment");
    check(g->data_offset <= size, "data offset");
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        touch(g, kv->key.ptr, kv->key.len);
        if (kv->value.type == GGUF_STRING)
            touch(g, kv->value.v.str.ptr, kv->value.v.str.len);
        else if (kv->value.type == GGUF_ARRAY)
            walk_array(g, &kv->value.v.arr);
        /* The getters on every key: values or clean errors, never a crash. */
        char key[256];
        if (kv->key.len < sizeof key && !memchr(kv->key.ptr, 0, kv->key.len)) {
            memcpy(key, kv->key.ptr, kv->key.len);
            key[kv->key.len] = 0;
            check(gguf_find_kv(g, key) == kv, "key lookup");
            uint32_t u;
            float f;
            bool b;
            gguf_str s;
            const gguf_array *a;
            gguf_get_u32(g, key, &u, &err);
            gguf_get_f32(g, key, &f, &err);
            gguf_get_bool(g, key, &b, &err);
            gguf_get_str(g, key, &s, &err);
            gguf_get_arr(g, key, GGUF_STRING, &a, &err);
        }
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        check(t->n_dims >= 1 && t->n_dims <= 4, "n_dims");
        check(woolly_type_get(t->type) != NULL, "tensor type");
        check(t->offset % g->alignment == 0, "tensor alignment");
        check(gguf_find_tensor(g, t->name) == t, "tensor lookup");
        check(inside(g, t->data, t->nbytes), "tensor data outside the buffer");
        const uint8_t *d = t->data;
        sink ^= d[0] ^ d[t->nbytes - 1];
    }
    gguf_close(g);
    return 0;
}
