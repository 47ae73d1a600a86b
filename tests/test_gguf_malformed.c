/* Malformed GGUF inputs, built byte by byte. Each is parsed from a heap copy of exactly its size so
 * that the sanitizers catch any read past the end; each must fail with a message naming the problem. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "testutil.h"

/* ---- a small GGUF byte builder ---- */

typedef struct tb {
    uint8_t *p;
    size_t n, cap;
} tb;

static void tb_bytes(tb *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        cr_assert(b->p);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void tb_le(tb *b, uint64_t v, int n)
{
    uint8_t le[8];
    for (int i = 0; i < n; i++)
        le[i] = (uint8_t)(v >> (8 * i));
    tb_bytes(b, le, (size_t)n);
}

static void tb_u8(tb *b, uint8_t v)
{
    tb_le(b, v, 1);
}
static void tb_u32(tb *b, uint32_t v)
{
    tb_le(b, v, 4);
}
static void tb_u64(tb *b, uint64_t v)
{
    tb_le(b, v, 8);
}

static void tb_zeros(tb *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tb_le(b, 0, 1);
}

static void tb_str(tb *b, const char *s)
{
    tb_u64(b, strlen(s));
    tb_bytes(b, s, strlen(s));
}

static tb tb_header(uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    tb b = {0};
    tb_bytes(&b, "GGUF", 4);
    tb_u32(&b, version);
    tb_u64(&b, n_tensors);
    tb_u64(&b, n_kv);
    return b;
}

static void tb_kv_u32(tb *b, const char *key, uint32_t v)
{
    tb_str(b, key);
    tb_u32(b, GGUF_U32);
    tb_u32(b, v);
}

static void tb_kv_str(tb *b, const char *key, const char *v)
{
    tb_str(b, key);
    tb_u32(b, GGUF_STRING);
    tb_str(b, v);
}

static void tb_tensor(tb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                      uint64_t offset)
{
    tb_str(b, name);
    tb_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        tb_u64(b, ne[d]);
    tb_u32(b, type);
    tb_u64(b, offset);
}

/* Pads to 32 and appends n bytes of tensor data. */
static void tb_data(tb *b, size_t n)
{
    while (b->n % 32)
        tb_u8(b, 0);
    for (size_t i = 0; i < n; i++)
        tb_u8(b, (uint8_t)i);
}

/* ---- checks ---- */

static char last_msg[512];

/* Parses exactly b->n bytes from the heap; returns the parsed file or NULL (message in last_msg). */
static gguf_file *parse_exact(const uint8_t *p, size_t n)
{
    uint8_t *copy = tu_heap_copy(p, n);
    woolly_error err = {{0}};
    gguf_file *g = gguf_parse(copy, n, &err);
    snprintf(last_msg, sizeof last_msg, "%s", err.msg);
    if (g) {
        /* Touch everything the parser handed out, so an out-of-buffer pointer would be caught. */
        volatile uint8_t sink = 0;
        for (uint64_t i = 0; i < g->n_tensors; i++)
            for (uint64_t j = 0; j < g->tensors[i].nbytes; j++)
                sink ^= ((const uint8_t *)g->tensors[i].data)[j];
        (void)sink;
        gguf_close(g);
        free(copy);
        return (gguf_file *)1; /* only compared with NULL by callers */
    }
    free(copy);
    return NULL;
}

/* b must fail to parse with a message containing every given substring. Frees b. */
static void expect_fail(tb *b, const char *sub1, const char *sub2)
{
    cr_assert_null(parse_exact(b->p, b->n), "parsed, expected an error about '%s'", sub1);
    cr_assert(strncmp(last_msg, "gguf: ", 6) == 0, "message: %s", last_msg);
    cr_assert(strstr(last_msg, sub1), "message '%s' does not mention '%s'", last_msg, sub1);
    if (sub2)
        cr_assert(strstr(last_msg, sub2), "message '%s' does not mention '%s'", last_msg, sub2);
    free(b->p);
}

static const uint64_t NE_4[] = {4};
static const uint64_t NE_32x2[] = {32, 2};

/* A small valid file: 3 kvs (string, u32, string array) and 2 tensors, data ending at the file end. */
static tb valid_file(void)
{
    tb b = tb_header(3, 2, 3);
    tb_kv_str(&b, "general.architecture", "llama");
    tb_kv_u32(&b, "llama.block_count", 2);
    tb_str(&b, "tokenizer.ggml.tokens");
    tb_u32(&b, GGUF_ARRAY);
    tb_u32(&b, GGUF_STRING);
    tb_u64(&b, 3);
    tb_str(&b, "<unk>");
    tb_str(&b, "a");
    tb_str(&b, "bc");
    tb_tensor(&b, "small.weight", 1, NE_4, WOOLLY_TYPE_F32, 0);
    tb_tensor(&b, "q.weight", 2, NE_32x2, WOOLLY_TYPE_Q8_0, 32);
    tb_data(&b, 32 + 2 * 34);
    return b;
}

Test(gguf_malformed, valid_file_parses_v3_and_v2)
{
    tb b = valid_file();
    uint8_t *copy = tu_heap_copy(b.p, b.n);
    woolly_error err = {{0}};
    gguf_file *g = gguf_parse(copy, b.n, &err);
    cr_assert(g, "%s", err.msg);
    cr_assert_eq(g->n_kv, 3);
    cr_assert_eq(g->n_tensors, 2);
    cr_assert_eq(gguf_find_tensor(g, "q.weight")->nbytes, 68);
    const gguf_array *a = NULL;
    cr_assert(gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_STRING, &a, &err));
    cr_assert(gguf_str_eq(a->strs[2], "bc"));
    gguf_close(g);
    copy[4] = 2; /* the same layout as version 2 */
    g = gguf_parse(copy, b.n, &err);
    cr_assert(g, "%s", err.msg);
    cr_assert_eq(g->version, 2);
    gguf_close(g);
    free(copy);
    free(b.p);
}

/* Every prefix of the valid file is truncated somewhere: all fail, and each message gives the size. */
Test(gguf_malformed, every_truncation_fails_and_names_the_size)
{
    tb b = valid_file();
    char num[32];
    for (size_t n = 0; n < b.n; n++) {
        cr_assert_null(parse_exact(b.p, n), "prefix of %zu bytes parsed", n);
        snprintf(num, sizeof num, "%zu", n);
        cr_assert(strstr(last_msg, num), "prefix %zu: message '%s' does not give the size", n, last_msg);
    }
    cr_assert_not_null(parse_exact(b.p, b.n));
    free(b.p);
}

/* Any byte of the valid file set to 0xff or 0x80: no crash, no overrun (errors or not). */
Test(gguf_malformed, single_byte_corruptions_never_crash)
{
    tb b = valid_file();
    const uint8_t vals[] = {0xff, 0x80, 0x00, 0x05};
    for (size_t i = 0; i < b.n; i++)
        for (size_t v = 0; v < sizeof vals; v++) {
            uint8_t *c = tu_heap_copy(b.p, b.n);
            c[i] = vals[v];
            gguf_file *g = parse_exact(c, b.n);
            if (!g)
                cr_assert(last_msg[0], "byte %zu = %u: error without a message", i, vals[v]);
            free(c);
        }
    free(b.p);
}

Test(gguf_malformed, empty_and_tiny)
{
    tb b = {0};
    tb_bytes(&b, "GG", 2);
    expect_fail(&b, "file of 2 bytes is too small", NULL);
    cr_assert_null(parse_exact((const uint8_t *)"", 0));
    cr_assert(strstr(last_msg, "0 bytes"), "%s", last_msg);
}

Test(gguf_malformed, bad_magic)
{
    tb b = valid_file();
    memcpy(b.p, "GGML", 4);
    expect_fail(&b, "bad magic 47 47 4d 4c", "not a GGUF file");
}

Test(gguf_malformed, version_1)
{
    tb b = tb_header(1, 0, 0);
    expect_fail(&b, "version 1 is not supported", NULL);
}

Test(gguf_malformed, version_4)
{
    tb b = tb_header(4, 0, 0);
    expect_fail(&b, "unsupported GGUF version 4", NULL);
}

Test(gguf_malformed, big_endian_version)
{
    tb b = tb_header(0x03000000u, 0, 0);
    expect_fail(&b, "version 50331648", "big-endian");
}

Test(gguf_malformed, absurd_kv_count)
{
    tb b = tb_header(3, 0, UINT64_C(1) << 60);
    tb_kv_u32(&b, "a", 1);
    expect_fail(&b, "1152921504606846976 key/value pairs cannot fit", "bytes left");
}

Test(gguf_malformed, absurd_tensor_count)
{
    tb b = tb_header(3, UINT64_MAX, 1);
    tb_kv_u32(&b, "a", 1);
    expect_fail(&b, "18446744073709551615 tensor infos cannot fit", NULL);
}

Test(gguf_malformed, key_length_past_end)
{
    tb b = tb_header(3, 0, 1);
    tb_u64(&b, 1000);
    tb_bytes(&b, "general.name", 12);
    expect_fail(&b, "kv 0: key at offset 24 has length 1000", "past the end");
}

Test(gguf_malformed, empty_key)
{
    tb b = tb_header(3, 0, 1);
    tb_kv_u32(&b, "", 1);
    expect_fail(&b, "empty key", NULL);
}

Test(gguf_malformed, string_value_past_end)
{
    tb b = tb_header(3, 0, 1);
    tb_str(&b, "general.name");
    tb_u32(&b, GGUF_STRING);
    tb_u64(&b, UINT64_C(1) << 62);
    tb_bytes(&b, "abc", 3);
    expect_fail(&b, "'general.name': string value", "length 4611686018427387904");
}

Test(gguf_malformed, numeric_array_past_end)
{
    tb b = tb_header(3, 0, 1);
    tb_str(&b, "tokenizer.ggml.scores");
    tb_u32(&b, GGUF_ARRAY);
    tb_u32(&b, GGUF_F32);
    tb_u64(&b, 5);
    tb_zeros(&b, 16); /* 4 of the 5 floats */
    expect_fail(&b, "'tokenizer.ggml.scores'", "5 f32 elements runs past the end");
}

Test(gguf_malformed, string_array_count_absurd)
{
    tb b = tb_header(3, 0, 1);
    tb_str(&b, "tokenizer.ggml.tokens");
    tb_u32(&b, GGUF_ARRAY);
    tb_u32(&b, GGUF_STRING);
    tb_u64(&b, UINT64_C(1) << 61); /* would be a 2^65-byte allocation */
    tb_str(&b, "x");
    expect_fail(&b, "'tokenizer.ggml.tokens'", "2305843009213693952 string elements");
}

Test(gguf_malformed, string_in_array_past_end)
{
    tb b = tb_header(3, 0, 1);
    tb_str(&b, "tokenizer.ggml.tokens");
    tb_u32(&b, GGUF_ARRAY);
    tb_u32(&b, GGUF_STRING);
    tb_u64(&b, 2);
    tb_str(&b, "ok");
    tb_u64(&b, 50);
    tb_bytes(&b, "short", 5);
    expect_fail(&b, "'tokenizer.ggml.tokens': array string", "length 50");
}

Test(gguf_malformed, unknown_value_type)
{
    tb b = tb_header(3, 0, 1);
    tb_str(&b, "x.y");
    tb_u32(&b, 13);
    tb_u32(&b, 0);
    expect_fail(&b, "'x.y': unknown value type 13", NULL);
}

Test(gguf_malformed, unknown_array_element_type)
{
    tb b = tb_header(3, 0, 1);
    tb_str(&b, "x.arr");
    tb_u32(&b, GGUF_ARRAY);
    tb_u32(&b, 77);
    tb_u64(&b, 1);
    tb_u64(&b, 0);
    expect_fail(&b, "'x.arr': array", "unknown element type 77");
}

Test(gguf_malformed, bad_bool)
{
    tb b = tb_header(3, 0, 1);
    tb_str(&b, "tokenizer.ggml.add_bos_token");
    tb_u32(&b, GGUF_BOOL);
    tb_u8(&b, 2);
    expect_fail(&b, "'tokenizer.ggml.add_bos_token': bad bool value 2", NULL);
}

Test(gguf_malformed, bad_bool_in_array)
{
    tb b = tb_header(3, 0, 1);
    tb_str(&b, "flags");
    tb_u32(&b, GGUF_ARRAY);
    tb_u32(&b, GGUF_BOOL);
    tb_u64(&b, 4);
    tb_u8(&b, 0);
    tb_u8(&b, 1);
    tb_u8(&b, 1);
    tb_u8(&b, 9);
    expect_fail(&b, "'flags': bad bool value 9 at element 3", NULL);
}

static void nested_prefix(tb *b, int levels)
{
    tb_str(b, "deep");
    tb_u32(b, GGUF_ARRAY);
    for (int i = 0; i < levels - 1; i++) {
        tb_u32(b, GGUF_ARRAY);
        tb_u64(b, 1);
    }
}

Test(gguf_malformed, nested_arrays_too_deep)
{
    tb b = tb_header(3, 0, 1);
    nested_prefix(&b, 9);
    tb_u32(&b, GGUF_U8);
    tb_u64(&b, 1);
    tb_u8(&b, 7);
    expect_fail(&b, "'deep': arrays nested too deep (more than 8 levels)", NULL);
}

Test(gguf_malformed, nested_arrays_at_the_limit_parse)
{
    tb b = tb_header(3, 0, 1);
    nested_prefix(&b, 8);
    tb_u32(&b, GGUF_U8);
    tb_u64(&b, 1);
    tb_u8(&b, 7);
    cr_assert_not_null(parse_exact(b.p, b.n), "%s", last_msg);
    free(b.p);
}

Test(gguf_malformed, nested_array_count_past_end)
{
    tb b = tb_header(3, 0, 1);
    tb_str(&b, "deep");
    tb_u32(&b, GGUF_ARRAY);
    tb_u32(&b, GGUF_ARRAY);
    tb_u64(&b, 1000000); /* 1e6 nested arrays of at least 12 bytes each in a ~60-byte file */
    tb_u32(&b, GGUF_U8);
    tb_u64(&b, 0);
    expect_fail(&b, "'deep'", "1000000 array elements runs past the end");
}

Test(gguf_malformed, duplicate_key)
{
    tb b = tb_header(3, 0, 3);
    tb_kv_u32(&b, "llama.block_count", 2);
    tb_kv_str(&b, "general.name", "x");
    tb_kv_u32(&b, "llama.block_count", 3);
    expect_fail(&b, "kv 2 'llama.block_count': duplicate key (first defined as kv 0)", NULL);
}

static tb one_tensor_file(uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset, size_t data)
{
    tb b = tb_header(3, 1, 1);
    tb_kv_str(&b, "general.architecture", "llama");
    tb_tensor(&b, "blk.3.ffn_up.weight", n_dims, ne, type, offset);
    tb_data(&b, data);
    return b;
}

Test(gguf_malformed, n_dims_0)
{
    tb b = one_tensor_file(0, NE_4, WOOLLY_TYPE_F32, 0, 16);
    expect_fail(&b, "tensor 'blk.3.ffn_up.weight': n_dims is 0, must be 1 to 4", NULL);
}

Test(gguf_malformed, n_dims_5)
{
    const uint64_t ne[5] = {1, 1, 1, 1, 1};
    tb b = one_tensor_file(5, ne, WOOLLY_TYPE_F32, 0, 16);
    expect_fail(&b, "'blk.3.ffn_up.weight': n_dims is 5", NULL);
}

Test(gguf_malformed, zero_dimension)
{
    const uint64_t ne[2] = {4, 0};
    tb b = one_tensor_file(2, ne, WOOLLY_TYPE_F32, 0, 16);
    expect_fail(&b, "'blk.3.ffn_up.weight': dimension 1 is 0", NULL);
}

Test(gguf_malformed, dims_product_overflows)
{
    const uint64_t ne[3] = {UINT64_C(1) << 32, UINT64_C(1) << 32, 2};
    tb b = one_tensor_file(3, ne, WOOLLY_TYPE_F32, 0, 16);
    expect_fail(&b, "'blk.3.ffn_up.weight': shape [4294967296, 4294967296", "more than 2^63 elements");
}

Test(gguf_malformed, byte_size_overflows)
{
    /* 2^62 elements fit in 63 bits, but as F32 they are 2^64 bytes. */
    const uint64_t ne[2] = {UINT64_C(1) << 31, UINT64_C(1) << 31};
    tb b = one_tensor_file(2, ne, WOOLLY_TYPE_F32, 0, 16);
    expect_fail(&b, "'blk.3.ffn_up.weight': size of 4611686018427387904 F32 blocks overflows", NULL);
}

Test(gguf_malformed, huge_tensor_past_end_of_file)
{
    const uint64_t ne[2] = {4096, 4096};
    tb b = one_tensor_file(2, ne, WOOLLY_TYPE_F32, 0, 64);
    expect_fail(&b, "'blk.3.ffn_up.weight': data at offset 0", "of 67108864 bytes runs past end of file");
}

Test(gguf_malformed, unknown_tensor_type)
{
    tb b = one_tensor_file(1, NE_4, 99, 0, 16);
    expect_fail(&b, "'blk.3.ffn_up.weight': unknown tensor type 99", NULL);
}

Test(gguf_malformed, removed_tensor_type_4)
{
    tb b = one_tensor_file(1, NE_4, 4, 0, 16); /* Q4_2, long gone from the format */
    expect_fail(&b, "unknown tensor type 4", NULL);
}

Test(gguf_malformed, row_not_a_multiple_of_the_block)
{
    const uint64_t ne[2] = {300, 2};
    tb b = one_tensor_file(2, ne, WOOLLY_TYPE_Q4_K, 0, 1000);
    expect_fail(&b, "'blk.3.ffn_up.weight': row length 300 is not a multiple of the Q4_K block size 256",
                NULL);
}

Test(gguf_malformed, misaligned_offset)
{
    tb b = one_tensor_file(1, NE_4, WOOLLY_TYPE_F32, 4, 64);
    expect_fail(&b, "'blk.3.ffn_up.weight': data offset 4 is not a multiple of the alignment 32", NULL);
}

Test(gguf_malformed, offset_out_of_range)
{
    tb b = one_tensor_file(1, NE_4, WOOLLY_TYPE_F32, UINT64_MAX - 31, 16);
    expect_fail(&b, "data at offset 18446744073709551584", "runs past end of file");
}

Test(gguf_malformed, data_section_truncated)
{
    tb b = one_tensor_file(1, NE_4, WOOLLY_TYPE_F32, 32, 40); /* needs bytes 32..48 of the data section */
    char size[64];
    snprintf(size, sizeof size, "(size %zu)", b.n);
    expect_fail(&b, "tensor 'blk.3.ffn_up.weight': data at offset 32", size);
}

Test(gguf_malformed, duplicate_tensor_names)
{
    tb b = tb_header(3, 3, 0);
    tb_tensor(&b, "a.weight", 1, NE_4, WOOLLY_TYPE_F32, 0);
    tb_tensor(&b, "b.weight", 1, NE_4, WOOLLY_TYPE_F32, 32);
    tb_tensor(&b, "a.weight", 1, NE_4, WOOLLY_TYPE_F32, 64);
    tb_data(&b, 96);
    expect_fail(&b, "tensor 'a.weight': duplicate tensor name (tensor 2 and tensor 0)", NULL);
}

Test(gguf_malformed, tensor_name_past_end)
{
    tb b = tb_header(3, 1, 0);
    tb_u64(&b, 200);
    tb_bytes(&b, "blk.0.attn_q.weight.and.more.bytes.here", 39);
    expect_fail(&b, "tensor 0: name at offset 24 has length 200", NULL);
}

Test(gguf_malformed, tensor_name_with_nul)
{
    tb b = tb_header(3, 1, 0);
    tb_u64(&b, 3);
    tb_bytes(&b, "a\0b", 3);
    tb_u32(&b, 1);
    tb_u64(&b, 4);
    tb_u32(&b, WOOLLY_TYPE_F32);
    tb_u64(&b, 0);
    tb_data(&b, 16);
    expect_fail(&b, "name contains a NUL byte", NULL);
}

static tb alignment_file(uint32_t type, uint64_t value)
{
    tb b = tb_header(3, 0, 1);
    tb_str(&b, "general.alignment");
    tb_u32(&b, type);
    if (type == GGUF_STRING)
        tb_str(&b, "32");
    else
        tb_u32(&b, (uint32_t)value);
    return b;
}

Test(gguf_malformed, alignment_not_a_power_of_two)
{
    tb b = alignment_file(GGUF_U32, 48);
    expect_fail(&b, "general.alignment is 48, not a power of two", NULL);
    b = alignment_file(GGUF_U32, 0);
    expect_fail(&b, "general.alignment is 0", NULL);
}

Test(gguf_malformed, alignment_wrong_type)
{
    tb b = alignment_file(GGUF_STRING, 0);
    expect_fail(&b, "general.alignment has type string", NULL);
    b = alignment_file(GGUF_F32, 0);
    expect_fail(&b, "general.alignment has type f32", NULL);
}

Test(gguf_malformed, custom_alignment_is_used)
{
    tb b = tb_header(3, 1, 1);
    tb_kv_u32(&b, "general.alignment", 64);
    tb_tensor(&b, "t", 1, NE_4, WOOLLY_TYPE_F32, 32); /* aligned to 32 but not to 64 */
    while (b.n % 64)
        tb_u8(&b, 0);
    tb_zeros(&b, 64);
    expect_fail(&b, "data offset 32 is not a multiple of the alignment 64", NULL);
}

/* Big counts that are honest must stay cheap: 200k tensor names (hashed duplicate check) and a
 * 500k-string array parse in linear time (a quadratic check would take minutes here). With the last
 * name equal to the first, the duplicate is found and named. */
static tb many_tensors_file(int n_tensors, int n_strings, bool last_duplicates_first)
{
    tb b = tb_header(3, (uint64_t)n_tensors, 1);
    tb_str(&b, "tokenizer.ggml.tokens");
    tb_u32(&b, GGUF_ARRAY);
    tb_u32(&b, GGUF_STRING);
    tb_u64(&b, (uint64_t)n_strings);
    for (int i = 0; i < n_strings; i++) {
        char s[16];
        snprintf(s, sizeof s, "w%d", i);
        tb_str(&b, s);
    }
    for (int i = 0; i < n_tensors; i++) {
        char name[32];
        snprintf(name, sizeof name, "blk.%d.w", last_duplicates_first && i == n_tensors - 1 ? 0 : i);
        tb_tensor(&b, name, 1, NE_4, WOOLLY_TYPE_F32, 0);
    }
    tb_data(&b, 16);
    return b;
}

Test(gguf_malformed, many_tensors_and_strings_parse_in_linear_time)
{
    tb b = many_tensors_file(200000, 500000, false);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_not_null(parse_exact(b.p, b.n), "%s", last_msg);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    cr_assert_lt(secs, 10.0, "parse took %.1f s", secs);
    free(b.p);

    b = many_tensors_file(200000, 10, true);
    expect_fail(&b, "tensor 'blk.0.w': duplicate tensor name (tensor 199999 and tensor 0)", NULL);
}

/* The 256-value formats with odd block sizes: IQ4_XS (136 bytes) and Q3_K (110 bytes) rows are checked
 * like every other type's. */
Test(gguf_malformed, iq4_xs_row_not_a_multiple_of_the_block)
{
    const uint64_t ne[2] = {128, 2};
    tb b = one_tensor_file(2, ne, WOOLLY_TYPE_IQ4_XS, 0, 1000);
    expect_fail(&b, "'blk.3.ffn_up.weight': row length 128 is not a multiple of the IQ4_XS block size 256",
                NULL);
}

Test(gguf_malformed, q3_k_tensor_past_end_of_file)
{
    const uint64_t ne[2] = {256, 4};
    tb b = one_tensor_file(2, ne, WOOLLY_TYPE_Q3_K, 0, 400); /* 4 blocks of 110 bytes: 440 */
    expect_fail(&b, "'blk.3.ffn_up.weight': data at offset 0", "of 440 bytes runs past end of file");
}

/* The 32-value formats: a row that is no whole block of 32, and a tensor whose blocks do not fit the data
 * the file holds (its size follows from its type and shape: 64 x 2 IQ4_NL values are 4 blocks of 18 bytes). */
Test(gguf_malformed, legacy_formats_row_and_size)
{
    const uint64_t ne[2] = {48, 2};
    tb b = one_tensor_file(2, ne, WOOLLY_TYPE_Q5_1, 0, 1000);
    expect_fail(&b, "'blk.3.ffn_up.weight': row length 48 is not a multiple of the Q5_1 block size 32", NULL);
    const uint64_t ne2[2] = {64, 2};
    tb c = one_tensor_file(2, ne2, WOOLLY_TYPE_IQ4_NL, 0, 4 * 18 - 1);
    expect_fail(&c, "'blk.3.ffn_up.weight': data at offset 0", "of 72 bytes runs past end of file");
}
