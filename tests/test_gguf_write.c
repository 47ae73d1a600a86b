/* The GGUF writer: a round trip of every value type (nested arrays included) and tensors of several
 * types; rewriting the shared models through the writer; and the writer's own error handling. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_write.h"
#include "gguf_check.h"
#include "testutil.h"

static const gguf_value *value_of(const gguf_file *g, const char *key)
{
    const gguf_kv *kv = gguf_find_kv(g, key);
    cr_assert(kv != NULL, "key %s missing", key);
    return &kv->value;
}

Test(gguf_write, every_value_type_and_tensor_types_round_trip)
{
    const char *path = tu_tmp_path("all-types.gguf");
    woolly_error err = {{0}};
    gguf_writer *w = gguf_writer_open(path, &err);
    cr_assert(w != NULL, "%s", err.msg);

    /* Scalars of every type, through copy_kv (the setters cover only the common ones). */
    static const struct {
        const char *key;
        gguf_value v;
    } SCALARS[] = {
        {"t.u8", {.type = GGUF_U8, .v.u64 = 200}},
        {"t.i8", {.type = GGUF_I8, .v.i64 = -100}},
        {"t.u16", {.type = GGUF_U16, .v.u64 = 60000}},
        {"t.i16", {.type = GGUF_I16, .v.i64 = -30000}},
        {"t.u32_copy", {.type = GGUF_U32, .v.u64 = 4000000000u}},
        {"t.i32_copy", {.type = GGUF_I32, .v.i64 = -2000000000}},
        {"t.f32_copy", {.type = GGUF_F32, .v.f64 = 0.25}},
        {"t.bool_copy", {.type = GGUF_BOOL, .v.u64 = 1}},
        {"t.u64", {.type = GGUF_U64, .v.u64 = 0xfedcba9876543210ull}},
        {"t.i64", {.type = GGUF_I64, .v.i64 = -1234567890123456789ll}},
        {"t.f64", {.type = GGUF_F64, .v.f64 = 3.141592653589793}},
    };
    for (size_t i = 0; i < sizeof SCALARS / sizeof SCALARS[0]; i++)
        gguf_writer_copy_kv(w, &(gguf_kv){{SCALARS[i].key, strlen(SCALARS[i].key)}, SCALARS[i].v});

    gguf_writer_set_u32(w, "t.u32", 7);
    gguf_writer_set_i32(w, "t.i32", -7);
    gguf_writer_set_f32(w, "t.f32", 1.5f);
    gguf_writer_set_bool(w, "t.bool", false);
    gguf_writer_set_str(w, "t.str", "héllo");
    gguf_writer_set_str(w, "t.empty_str", "");
    static const char *const STRS[] = {"a", "", "ccc", "\xc4\xa0 t"};
    gguf_writer_set_arr_str(w, "t.arr_str", STRS, 4);
    static const float F32S[] = {1.0f, -2.5f, 1e-7f};
    gguf_writer_set_arr_f32(w, "t.arr_f32", F32S, 3);
    static const int32_t I32S[] = {-1, 0, 2147483647};
    gguf_writer_set_arr_i32(w, "t.arr_i32", I32S, 3);
    gguf_writer_set_arr_i32(w, "t.arr_empty", NULL, 0);
    /* Replacing a value keeps the key's place. */
    gguf_writer_set_u32(w, "t.replaced", 1);
    gguf_writer_set_str(w, "t.replaced", "second");

    /* Arrays of every numeric element type (raw little-endian bytes) and bools. */
    static const uint8_t RAW[16] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0};
    static const uint8_t BOOLS[3] = {1, 0, 1};
    const enum gguf_vtype num_types[] = {GGUF_U8,  GGUF_I8,  GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32,
                                         GGUF_F32, GGUF_U64, GGUF_I64, GGUF_F64, GGUF_BOOL};
    char key[64];
    for (size_t i = 0; i < sizeof num_types / sizeof num_types[0]; i++) {
        enum gguf_vtype t = num_types[i];
        gguf_array a = {.type = t,
                        .n = t == GGUF_BOOL ? 3 : 16u / (unsigned)gguf_vtype_size(t),
                        .data = t == GGUF_BOOL ? BOOLS : RAW};
        snprintf(key, sizeof key, "t.num_%s", gguf_vtype_name(t));
        gguf_writer_copy_kv(w, &(gguf_kv){{key, strlen(key)}, {.type = GGUF_ARRAY, .v.arr = a}});
    }

    /* Nested: [[1, 2], [], [["x", "yy"]]] as arrays of arrays. */
    static const int32_t ONE_TWO[] = {1, 2};
    gguf_str xy[] = {{"x", 1}, {"yy", 2}};
    gguf_value inner_strs[] = {{.type = GGUF_ARRAY, .v.arr = {.type = GGUF_STRING, .n = 2, .strs = xy}}};
    gguf_value items[] = {
        {.type = GGUF_ARRAY, .v.arr = {.type = GGUF_I32, .n = 2, .data = ONE_TWO}},
        {.type = GGUF_ARRAY, .v.arr = {.type = GGUF_F32, .n = 0}},
        {.type = GGUF_ARRAY, .v.arr = {.type = GGUF_ARRAY, .n = 1, .items = inner_strs}},
    };
    gguf_value nested = {.type = GGUF_ARRAY, .v.arr = {.type = GGUF_ARRAY, .n = 3, .items = items}};
    gguf_writer_copy_kv(w, &(gguf_kv){{"t.nested", 8}, nested});

    /* Tensors of several types and ranks, with deterministic bytes. */
    static const struct {
        const char *name;
        enum woolly_type type;
        uint32_t n_dims;
        uint64_t ne[4];
    } TENSORS[] = {
        {"a.f32", WOOLLY_TYPE_F32, 1, {7}},           {"b.f16", WOOLLY_TYPE_F16, 2, {3, 5}},
        {"c.q8_0", WOOLLY_TYPE_Q8_0, 2, {64, 3}},     {"d.q4_k", WOOLLY_TYPE_Q4_K, 2, {256, 2}},
        {"e.q6_k", WOOLLY_TYPE_Q6_K, 3, {256, 1, 2}}, {"f.i8", WOOLLY_TYPE_I8, 4, {3, 1, 2, 5}},
    };
    enum { NT = sizeof TENSORS / sizeof TENSORS[0] };
    uint8_t *data[NT];
    size_t sizes[NT];
    tu_rng rng = {42};
    for (int i = 0; i < NT; i++) {
        cr_assert_eq(
            gguf_writer_add_tensor(w, TENSORS[i].name, TENSORS[i].type, TENSORS[i].n_dims, TENSORS[i].ne), i);
        uint64_t n = 1;
        for (uint32_t d = 0; d < TENSORS[i].n_dims; d++)
            n *= TENSORS[i].ne[d];
        sizes[i] = woolly_row_bytes(TENSORS[i].type, (int64_t)TENSORS[i].ne[0]) * (n / TENSORS[i].ne[0]);
        data[i] = malloc(sizes[i]);
        cr_assert(data[i]);
        for (size_t j = 0; j < sizes[i]; j++)
            data[i][j] = (uint8_t)tu_rand_u64(&rng);
    }
    cr_assert_eq(gguf_writer_write_header(w, &err), 0, "%s", err.msg);
    /* Tensor 0 in two pieces; tensors 1 and 2 in one call; the rest whole. */
    cr_assert_eq(gguf_writer_write_data(w, data[0], 5, &err), 0, "%s", err.msg);
    cr_assert_eq(gguf_writer_write_data(w, data[0] + 5, sizes[0] - 5, &err), 0, "%s", err.msg);
    uint8_t *both = malloc(sizes[1] + sizes[2]);
    memcpy(both, data[1], sizes[1]);
    memcpy(both + sizes[1], data[2], sizes[2]);
    cr_assert_eq(gguf_writer_write_data(w, both, sizes[1] + sizes[2], &err), 0, "%s", err.msg);
    free(both);
    for (int i = 3; i < NT; i++)
        cr_assert_eq(gguf_writer_write_data(w, data[i], sizes[i], &err), 0, "%s", err.msg);
    cr_assert_eq(gguf_writer_close(w, &err), 0, "%s", err.msg);

    gguf_file *g = tu_gguf_open(path);
    cr_assert_eq(g->version, 3);
    cr_assert_eq(g->alignment, 32);
    cr_assert_eq(g->data_offset % 32, 0);
    cr_assert_eq(g->size % 32, 0, "file padded to the alignment");
    for (size_t i = 0; i < sizeof SCALARS / sizeof SCALARS[0]; i++)
        cr_assert(tu_gguf_value_equal(value_of(g, SCALARS[i].key), &SCALARS[i].v), "%s", SCALARS[i].key);
    uint32_t u = 0;
    int64_t i64 = value_of(g, "t.i32")->v.i64;
    cr_assert(gguf_get_u32(g, "t.u32", &u, &err) && u == 7);
    cr_assert_eq(value_of(g, "t.i32")->type, GGUF_I32);
    cr_assert_eq(i64, -7);
    float f = 0;
    cr_assert(gguf_get_f32(g, "t.f32", &f, &err) && f == 1.5f);
    bool b = true;
    cr_assert(gguf_get_bool(g, "t.bool", &b, &err) && !b);
    gguf_str s;
    cr_assert(gguf_get_str(g, "t.str", &s, &err) && gguf_str_eq(s, "héllo"));
    cr_assert(gguf_get_str(g, "t.empty_str", &s, &err) && s.len == 0);
    cr_assert(gguf_get_str(g, "t.replaced", &s, &err) && gguf_str_eq(s, "second"));
    const gguf_array *a = NULL;
    cr_assert(gguf_get_arr(g, "t.arr_str", GGUF_STRING, &a, &err) && a->n == 4);
    for (int i = 0; i < 4; i++)
        cr_assert(gguf_str_eq(a->strs[i], STRS[i]));
    cr_assert(gguf_get_arr(g, "t.arr_f32", GGUF_F32, &a, &err) && a->n == 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq((float)gguf_arr_f64(a, (uint64_t)i), F32S[i]);
    cr_assert(gguf_get_arr(g, "t.arr_i32", GGUF_I32, &a, &err) && a->n == 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(gguf_arr_i64(a, (uint64_t)i), I32S[i]);
    cr_assert(gguf_get_arr(g, "t.arr_empty", GGUF_I32, &a, &err) && a->n == 0);
    for (size_t i = 0; i < sizeof num_types / sizeof num_types[0]; i++) {
        snprintf(key, sizeof key, "t.num_%s", gguf_vtype_name(num_types[i]));
        enum gguf_vtype t = num_types[i];
        cr_assert(gguf_get_arr(g, key, t, &a, &err), "%s: %s", key, err.msg);
        cr_assert_eq(a->n, t == GGUF_BOOL ? 3 : 16u / (unsigned)gguf_vtype_size(t), "%s", key);
        cr_assert(!memcmp(a->data, t == GGUF_BOOL ? BOOLS : RAW, t == GGUF_BOOL ? 3 : 16), "%s", key);
        if (t != GGUF_F32 && t != GGUF_F64)
            cr_assert_eq(gguf_arr_i64(a, 0), gguf_vtype_size(t) == 8 ? 0x200000001ll : 1, "%s", key);
    }
    cr_assert(tu_gguf_value_equal(value_of(g, "t.nested"), &nested));
    const gguf_array *deep = &value_of(g, "t.nested")->v.arr.items[2].v.arr.items[0].v.arr;
    cr_assert(deep->type == GGUF_STRING && gguf_str_eq(deep->strs[1], "yy"));

    /* Keys in first-set order. */
    cr_assert(gguf_str_eq(g->kv[0].key, "t.u8"));
    const gguf_kv *rep = gguf_find_kv(g, "t.replaced");
    cr_assert(gguf_str_eq(rep[-1].key, "t.arr_empty"));

    cr_assert_eq(g->n_tensors, NT);
    for (int i = 0; i < NT; i++) {
        const gguf_tensor *t = &g->tensors[i];
        cr_assert_str_eq(t->name, TENSORS[i].name);
        cr_assert_eq(t->type, TENSORS[i].type);
        cr_assert_eq(t->n_dims, TENSORS[i].n_dims);
        for (uint32_t d = 0; d < 4; d++)
            cr_assert_eq(t->ne[d], d < t->n_dims ? TENSORS[i].ne[d] : 1);
        cr_assert_eq(t->nbytes, sizes[i]);
        cr_assert_eq(t->offset % 32, 0);
        cr_assert(!memcmp(t->data, data[i], sizes[i]), "%s data differs", t->name);
        free(data[i]);
    }
    gguf_close(g);
    remove(path);
}

/* Every key/value and tensor of `src` through the writer; the result must read back the same. Returns
 * whether the new file is byte-identical to the original. */
static bool rewrite_and_compare(const char *rel)
{
    gguf_file *src = tu_gguf_open(tu_data(rel));
    const char *path = tu_tmp_path("rewrite.gguf");
    woolly_error err = {{0}};
    gguf_writer *w = gguf_writer_open(path, &err);
    cr_assert(w != NULL, "%s", err.msg);
    for (uint64_t i = 0; i < src->n_kv; i++)
        gguf_writer_copy_kv(w, &src->kv[i]);
    for (uint64_t i = 0; i < src->n_tensors; i++) {
        const gguf_tensor *t = &src->tensors[i];
        cr_assert_eq(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne), (int)i);
    }
    cr_assert_eq(gguf_writer_write_header(w, &err), 0, "%s", err.msg);
    for (uint64_t i = 0; i < src->n_tensors; i++)
        cr_assert_eq(gguf_writer_write_data(w, src->tensors[i].data, src->tensors[i].nbytes, &err), 0, "%s",
                     err.msg);
    cr_assert_eq(gguf_writer_close(w, &err), 0, "%s", err.msg);

    gguf_file *g = tu_gguf_open(path);
    cr_assert_eq(g->n_kv, src->n_kv);
    for (uint64_t i = 0; i < src->n_kv; i++) {
        cr_assert(tu_gguf_str_equal(g->kv[i].key, src->kv[i].key), "kv %lu", (unsigned long)i);
        cr_assert(tu_gguf_value_equal(&g->kv[i].value, &src->kv[i].value), "%.*s", (int)src->kv[i].key.len,
                  src->kv[i].key.ptr);
    }
    cr_assert_eq(g->n_tensors, src->n_tensors);
    for (uint64_t i = 0; i < src->n_tensors; i++) {
        const gguf_tensor *a = &src->tensors[i], *b = &g->tensors[i];
        cr_assert_str_eq(b->name, a->name);
        cr_assert_eq(b->type, a->type);
        cr_assert_eq(b->n_dims, a->n_dims);
        cr_assert(!memcmp(b->ne, a->ne, sizeof a->ne));
        cr_assert_eq(b->nbytes, a->nbytes);
        cr_assert(!memcmp(b->data, a->data, a->nbytes), "%s data differs", a->name);
    }
    bool identical = g->size == src->size && !memcmp(g->buf, src->buf, src->size);
    gguf_close(g);
    gguf_close(src);
    remove(path);
    return identical;
}

/* llama.cpp wrote these files with the same layout rules (v3, alignment 32, tensors in order, each
 * padded), so the rewrite is the original file, byte for byte: what Woolly writes is what llama.cpp
 * writes. */
Test(gguf_write, rewrite_stories260K_is_byte_identical)
{
    cr_assert(rewrite_and_compare("models/stories260K.gguf"));
}

Test(gguf_write, rewrite_tiny_llama_q4_k_m_is_byte_identical)
{
    cr_assert(rewrite_and_compare("models/tiny-llama-q4_k_m.gguf"));
}

Test(gguf_write, rewrite_tiny_granite_is_byte_identical)
{
    cr_assert(rewrite_and_compare("models/tiny-granite-q4_k_m.gguf"));
}

Test(gguf_write, rewrite_vocab_reads_back_the_same)
{
    rewrite_and_compare("vocab/ggml-vocab-gpt-2.gguf");
    rewrite_and_compare("vocab/ggml-vocab-llama-spm.gguf");
}

static bool file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static gguf_writer *one_tensor_writer(const char *path, uint64_t ne0)
{
    woolly_error err = {{0}};
    gguf_writer *w = gguf_writer_open(path, &err);
    cr_assert(w != NULL, "%s", err.msg);
    gguf_writer_set_str(w, "general.architecture", "llama");
    const uint64_t ne[1] = {ne0};
    cr_assert_eq(gguf_writer_add_tensor(w, "x", WOOLLY_TYPE_F32, 1, ne), 0);
    return w;
}

Test(gguf_write, incomplete_data_is_an_error_and_leaves_no_file)
{
    const char *path = tu_tmp_path("incomplete.gguf");
    woolly_error err = {{0}};
    gguf_writer *w = one_tensor_writer(path, 8);
    cr_assert_eq(gguf_writer_write_header(w, &err), 0, "%s", err.msg);
    float x[8] = {0};
    cr_assert_eq(gguf_writer_write_data(w, x, 12, &err), 0);
    cr_assert_neq(gguf_writer_close(w, &err), 0);
    cr_assert(strstr(err.msg, "'x' incomplete: 12 of 32 bytes"), "%s", err.msg);
    cr_assert_not(file_exists(path));
}

Test(gguf_write, too_much_data_is_an_error)
{
    const char *path = tu_tmp_path("toomuch.gguf");
    woolly_error err = {{0}};
    gguf_writer *w = one_tensor_writer(path, 2);
    cr_assert_eq(gguf_writer_write_header(w, &err), 0, "%s", err.msg);
    float x[3] = {0};
    cr_assert_neq(gguf_writer_write_data(w, x, sizeof x, &err), 0);
    cr_assert(strstr(err.msg, "4 bytes of data beyond the 1 declared tensors"), "%s", err.msg);
    cr_assert_neq(gguf_writer_close(w, &err), 0);
    cr_assert_not(file_exists(path));
}

Test(gguf_write, bad_tensors_are_reported_by_write_header)
{
    const char *path = tu_tmp_path("badtensor.gguf");
    woolly_error err = {{0}};
    gguf_writer *w = gguf_writer_open(path, &err);
    const uint64_t ne[2] = {100, 2};
    cr_assert_eq(gguf_writer_add_tensor(w, "q", WOOLLY_TYPE_Q4_K, 2, ne), -1);
    cr_assert_neq(gguf_writer_write_header(w, &err), 0);
    cr_assert(strstr(err.msg, "'q'") && strstr(err.msg, "row length 100") && strstr(err.msg, "256"), "%s",
              err.msg);
    cr_assert_neq(gguf_writer_close(w, &err), 0);
    cr_assert_not(file_exists(path));

    w = gguf_writer_open(path, &err);
    cr_assert_eq(gguf_writer_add_tensor(w, "a", WOOLLY_TYPE_F32, 2, ne), 0);
    cr_assert_eq(gguf_writer_add_tensor(w, "a", WOOLLY_TYPE_F32, 2, ne), -1);
    cr_assert_neq(gguf_writer_write_header(w, &err), 0);
    cr_assert(strstr(err.msg, "'a' added twice"), "%s", err.msg);
    gguf_writer_close(w, NULL);

    w = gguf_writer_open(path, &err);
    cr_assert_eq(gguf_writer_add_tensor(w, "a", WOOLLY_TYPE_F32, 5, ne), -1);
    cr_assert_neq(gguf_writer_close(w, &err), 0);
    cr_assert(strstr(err.msg, "n_dims 5"), "%s", err.msg);
    cr_assert_not(file_exists(path));
}

Test(gguf_write, open_in_missing_dir_names_the_path)
{
    woolly_error err = {{0}};
    cr_assert_null(gguf_writer_open("/nonexistent/dir/out.gguf", &err));
    cr_assert(strstr(err.msg, "/nonexistent/dir/out.gguf"), "%s", err.msg);
}

Test(gguf_write, vocabulary_only_file)
{
    const char *path = tu_tmp_path("vocab-only.gguf");
    woolly_error err = {{0}};
    gguf_writer *w = gguf_writer_open(path, &err);
    static const char *const TOK[] = {"<unk>", "a", "b"};
    gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", TOK, 3);
    cr_assert_eq(gguf_writer_write_header(w, &err), 0, "%s", err.msg);
    cr_assert_eq(gguf_writer_close(w, &err), 0, "%s", err.msg);
    gguf_file *g = tu_gguf_open(path);
    cr_assert_eq(g->n_tensors, 0);
    cr_assert_eq(g->n_kv, 2);
    gguf_close(g);
    remove(path);
}
