#include "gguf_check.h"

#include <criterion/criterion.h>
#include <string.h>

#include "testutil.h"

gguf_file *tu_gguf_open(const char *path)
{
    woolly_error err = {{0}};
    gguf_file *g = gguf_open(path, &err);
    cr_assert(g != NULL, "%s: %s", path, err.msg);
    return g;
}

gguf_file *tu_gguf_open_data(const char *rel)
{
    return tu_gguf_open(tu_data(rel));
}

uint32_t tu_gguf_u32(const gguf_file *g, const char *key)
{
    woolly_error err = {{0}};
    uint32_t v = 0;
    cr_assert(gguf_get_u32(g, key, &v, &err), "key %s: %s", key, err.msg);
    return v;
}

float tu_gguf_f32(const gguf_file *g, const char *key)
{
    woolly_error err = {{0}};
    float v = 0;
    cr_assert(gguf_get_f32(g, key, &v, &err), "key %s: %s", key, err.msg);
    return v;
}

bool tu_gguf_str_equal(gguf_str a, gguf_str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, (size_t)a.len) == 0);
}

static bool array_equal(const gguf_array *a, const gguf_array *b)
{
    if (a->type != b->type || a->n != b->n)
        return false;
    for (uint64_t i = 0; i < a->n; i++) {
        if (a->type == GGUF_STRING && !tu_gguf_str_equal(a->strs[i], b->strs[i]))
            return false;
        if (a->type == GGUF_ARRAY && !tu_gguf_value_equal(&a->items[i], &b->items[i]))
            return false;
    }
    if (a->type == GGUF_STRING || a->type == GGUF_ARRAY || a->n == 0)
        return true;
    return memcmp(a->data, b->data, (size_t)a->n * (size_t)gguf_vtype_size(a->type)) == 0;
}

bool tu_gguf_value_equal(const gguf_value *a, const gguf_value *b)
{
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case GGUF_STRING:
        return tu_gguf_str_equal(a->v.str, b->v.str);
    case GGUF_ARRAY:
        return array_equal(&a->v.arr, &b->v.arr);
    default: /* every scalar is held in 8 bytes (u64, i64 or f64): compare the bits */
        return memcmp(&a->v, &b->v, sizeof a->v.u64) == 0;
    }
}
