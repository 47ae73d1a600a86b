/* GGUF v2/v3 parser. One pass over the buffer, validating as it goes: every length and count is
 * checked against the bytes that remain before anything is allocated for it, so memory and time stay
 * linear in the file size whatever the file claims. Tensor data ranges are checked once the end of
 * the header (and so the start of the data section) is known.
 *
 * Layout (all little-endian): magic "GGUF", u32 version, u64 n_tensors, u64 n_kv, n_kv key/value
 * pairs (string key, u32 value type, value), n_tensors tensor infos (string name, u32 n_dims,
 * n_dims x u64 ne, u32 type, u64 offset), padding to `general.alignment`, tensor data. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf_arena.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
/* Deeper nesting than this is rejected: no real file nests arrays at all, and the limit bounds the
 * parser's recursion. */
#define GGUF_MAX_ARRAY_DEPTH 8
/* Smallest encodings, used to bound counts by the remaining bytes before allocating. */
#define GGUF_MIN_KV_BYTES 13     /* key length (8) + value type (4) + a 1-byte value */
#define GGUF_MIN_TENSOR_BYTES 32 /* name length (8) + n_dims (4) + one dim (8) + type (4) + offset (8) */
#define GGUF_MIN_ARRAY_BYTES 12  /* element type (4) + count (8) */
/* Key and tensor names are quoted in messages up to this many bytes. */
#define GGUF_MSG_NAME_MAX 96

typedef struct parser {
    const uint8_t *buf;
    size_t size;
    size_t pos;
    woolly_error *err;
    gguf_arena *arena;
    char ctx[160]; /* what is being parsed, for messages: "kv 3 'general.name'" */
} parser;

static size_t remaining(const parser *p)
{
    return p->size - p->pos;
}

static uint64_t load_le(const uint8_t *b, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | b[i];
    return v;
}

static int truncated(parser *p, const char *what, uint64_t need)
{
    return woolly_fail(p->err, "%s: %s at offset %zu needs %" PRIu64 " bytes, but the file ends at %zu",
                       p->ctx, what, p->pos, need, p->size);
}

static int read_uint(parser *p, int nbytes, uint64_t *out, const char *what)
{
    *out = 0;
    if (remaining(p) < (size_t)nbytes)
        return truncated(p, what, (uint64_t)nbytes);
    *out = load_le(p->buf + p->pos, nbytes);
    p->pos += (size_t)nbytes;
    return 0;
}

static int read_u32(parser *p, uint32_t *out, const char *what)
{
    uint64_t v = 0;
    if (read_uint(p, 4, &v, what))
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static int read_str(parser *p, gguf_str *out, const char *what)
{
    uint64_t len = 0;
    size_t at = p->pos;
    if (read_uint(p, 8, &len, what))
        return -1;
    if (len > remaining(p))
        return woolly_fail(p->err,
                           "%s: %s at offset %zu has length %" PRIu64 ", which runs past the end of the file "
                           "(%zu bytes left, file size %zu)",
                           p->ctx, what, at, len, remaining(p), p->size);
    out->ptr = (const char *)p->buf + p->pos;
    out->len = len;
    p->pos += (size_t)len;
    return 0;
}

int gguf_vtype_size(uint32_t t)
{
    switch (t) {
    case GGUF_U8:
    case GGUF_I8:
    case GGUF_BOOL:
        return 1;
    case GGUF_U16:
    case GGUF_I16:
        return 2;
    case GGUF_U32:
    case GGUF_I32:
    case GGUF_F32:
        return 4;
    case GGUF_U64:
    case GGUF_I64:
    case GGUF_F64:
        return 8;
    default:
        return 0;
    }
}

static bool is_signed(uint32_t t)
{
    return t == GGUF_I8 || t == GGUF_I16 || t == GGUF_I32 || t == GGUF_I64;
}

/* Decodes a scalar of type t at b (which holds gguf_vtype_size(t) bytes). */
static void decode_scalar(uint32_t t, const uint8_t *b, gguf_value *out)
{
    int n = gguf_vtype_size(t);
    uint64_t raw = load_le(b, n);
    out->type = (enum gguf_vtype)t;
    if (t == GGUF_F32) {
        float f;
        uint32_t r32 = (uint32_t)raw;
        memcpy(&f, &r32, 4);
        out->v.f64 = f;
    } else if (t == GGUF_F64) {
        memcpy(&out->v.f64, &raw, 8);
    } else if (is_signed(t)) {
        /* Sign-extend from n bytes. */
        int shift = 64 - 8 * n;
        out->v.i64 = (int64_t)(raw << shift) >> shift;
    } else {
        out->v.u64 = raw;
    }
}

static int parse_array(parser *p, gguf_array *arr, int depth);

static int parse_value(parser *p, uint32_t type, gguf_value *out, int depth)
{
    int n = gguf_vtype_size(type);
    if (n > 0) {
        if (remaining(p) < (size_t)n)
            return truncated(p, gguf_vtype_name((enum gguf_vtype)type), (uint64_t)n);
        const uint8_t *b = p->buf + p->pos;
        if (type == GGUF_BOOL && b[0] > 1)
            return woolly_fail(p->err, "%s: bad bool value %u at offset %zu (must be 0 or 1)", p->ctx, b[0],
                               p->pos);
        decode_scalar(type, b, out);
        p->pos += (size_t)n;
        return 0;
    }
    out->type = (enum gguf_vtype)type;
    if (type == GGUF_STRING)
        return read_str(p, &out->v.str, "string value");
    if (type == GGUF_ARRAY)
        return parse_array(p, &out->v.arr, depth + 1);
    return woolly_fail(p->err, "%s: unknown value type %" PRIu32 " at offset %zu", p->ctx, type, p->pos - 4);
}

static int parse_array(parser *p, gguf_array *arr, int depth)
{
    if (depth > GGUF_MAX_ARRAY_DEPTH)
        return woolly_fail(p->err, "%s: arrays nested too deep (more than %d levels) at offset %zu", p->ctx,
                           GGUF_MAX_ARRAY_DEPTH, p->pos);
    uint32_t et = 0;
    uint64_t n = 0;
    size_t at = p->pos;
    if (read_u32(p, &et, "array element type") || read_uint(p, 8, &n, "array length"))
        return -1;
    memset(arr, 0, sizeof *arr);
    arr->type = (enum gguf_vtype)et;
    arr->n = n;
    int es = gguf_vtype_size(et);
    uint64_t min_elem = es > 0              ? (uint64_t)es
                        : et == GGUF_STRING ? 8
                        : et == GGUF_ARRAY  ? GGUF_MIN_ARRAY_BYTES
                                            : 0;
    if (min_elem == 0)
        return woolly_fail(p->err, "%s: array at offset %zu has unknown element type %" PRIu32, p->ctx, at,
                           et);
    if (n > remaining(p) / min_elem)
        return woolly_fail(p->err,
                           "%s: array at offset %zu of %" PRIu64 " %s elements runs past the end of the file "
                           "(%zu bytes left, file size %zu)",
                           p->ctx, at, n, gguf_vtype_name(arr->type), remaining(p), p->size);
    if (es > 0) {
        const uint8_t *b = p->buf + p->pos;
        if (et == GGUF_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (b[i] > 1)
                    return woolly_fail(p->err,
                                       "%s: bad bool value %u at element %" PRIu64 " (offset %zu) of array",
                                       p->ctx, b[i], i, p->pos + (size_t)i);
        arr->data = b;
        p->pos += (size_t)(n * (uint64_t)es);
        return 0;
    }
    if (n == 0)
        return 0;
    if (et == GGUF_STRING) {
        gguf_str *strs = gguf_arena_alloc(p->arena, (size_t)n * sizeof *strs);
        if (!strs)
            return woolly_fail(p->err, "%s: out of memory for an array of %" PRIu64 " strings", p->ctx, n);
        for (uint64_t i = 0; i < n; i++)
            if (read_str(p, &strs[i], "array string"))
                return -1;
        arr->strs = strs;
        return 0;
    }
    gguf_value *items = gguf_arena_alloc(p->arena, (size_t)n * sizeof *items);
    if (!items)
        return woolly_fail(p->err, "%s: out of memory for an array of %" PRIu64 " arrays", p->ctx, n);
    for (uint64_t i = 0; i < n; i++) {
        items[i].type = GGUF_ARRAY;
        if (parse_array(p, &items[i].v.arr, depth + 1))
            return -1;
    }
    arr->items = items;
    return 0;
}

static int name_len_for_msg(uint64_t len)
{
    return len > GGUF_MSG_NAME_MAX ? GGUF_MSG_NAME_MAX : (int)len;
}

static int parse_kvs(parser *p, gguf_file *g)
{
    snprintf(p->ctx, sizeof p->ctx, "header");
    if (g->n_kv > remaining(p) / GGUF_MIN_KV_BYTES)
        return woolly_fail(
            p->err, "header: %" PRIu64 " key/value pairs cannot fit in the %zu bytes left (file size %zu)",
            g->n_kv, remaining(p), p->size);
    if (g->n_kv == 0)
        return 0;
    g->kv = gguf_arena_alloc(p->arena, (size_t)g->n_kv * sizeof *g->kv);
    if (!g->kv)
        return woolly_fail(p->err, "out of memory for %" PRIu64 " key/value pairs", g->n_kv);
    gguf_index *index = gguf_index_new(p->arena, g->n_kv);
    if (!index)
        return woolly_fail(p->err, "out of memory for the key index");
    p->arena->kv_index = index;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        snprintf(p->ctx, sizeof p->ctx, "kv %" PRIu64, i);
        if (read_str(p, &kv->key, "key"))
            return -1;
        snprintf(p->ctx, sizeof p->ctx, "kv %" PRIu64 " '%.*s'", i, name_len_for_msg(kv->key.len),
                 kv->key.ptr);
        if (kv->key.len == 0)
            return woolly_fail(p->err, "%s: empty key", p->ctx);
        size_t dup =
            gguf_index_insert(index, kv->key.ptr, kv->key.len, (size_t)i, gguf_index_key_of_kv, g->kv);
        if (dup != GGUF_INDEX_NONE)
            return woolly_fail(p->err, "%s: duplicate key (first defined as kv %zu)", p->ctx, dup);
        uint32_t type;
        if (read_u32(p, &type, "value type") || parse_value(p, type, &kv->value, 0))
            return -1;
    }
    return 0;
}

static int read_alignment(parser *p, gguf_file *g)
{
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *kv = gguf_find_kv(g, "general.alignment");
    if (!kv)
        return 0;
    const gguf_value *v = &kv->value;
    int s = gguf_vtype_size(v->type);
    if (s == 0 || v->type == GGUF_BOOL || v->type == GGUF_F32 || v->type == GGUF_F64 ||
        (is_signed(v->type) && v->v.i64 < 0))
        return woolly_fail(p->err, "general.alignment has type %s, expected an unsigned integer",
                           gguf_vtype_name(v->type));
    uint64_t a = is_signed(v->type) ? (uint64_t)v->v.i64 : v->v.u64;
    if (a == 0 || (a & (a - 1)) != 0 || a > (1u << 30))
        return woolly_fail(p->err, "general.alignment is %" PRIu64 ", not a power of two between 1 and 2^30",
                           a);
    g->alignment = a;
    return 0;
}

static int parse_tensor_infos(parser *p, gguf_file *g)
{
    snprintf(p->ctx, sizeof p->ctx, "header");
    if (g->n_tensors > remaining(p) / GGUF_MIN_TENSOR_BYTES)
        return woolly_fail(
            p->err, "header: %" PRIu64 " tensor infos cannot fit in the %zu bytes left (file size %zu)",
            g->n_tensors, remaining(p), p->size);
    if (g->n_tensors == 0)
        return 0;
    g->tensors = gguf_arena_alloc(p->arena, (size_t)g->n_tensors * sizeof *g->tensors);
    gguf_index *index = gguf_index_new(p->arena, g->n_tensors);
    if (!g->tensors || !index)
        return woolly_fail(p->err, "out of memory for %" PRIu64 " tensor infos", g->n_tensors);
    p->arena->tensor_index = index;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        gguf_str name;
        snprintf(p->ctx, sizeof p->ctx, "tensor %" PRIu64, i);
        if (read_str(p, &name, "name"))
            return -1;
        snprintf(p->ctx, sizeof p->ctx, "tensor '%.*s'", name_len_for_msg(name.len), name.ptr);
        if (name.len == 0)
            return woolly_fail(p->err, "tensor %" PRIu64 ": empty name", i);
        if (memchr(name.ptr, 0, (size_t)name.len))
            return woolly_fail(p->err, "%s: name contains a NUL byte", p->ctx);
        t->name = gguf_arena_alloc(p->arena, (size_t)name.len + 1);
        if (!t->name)
            return woolly_fail(p->err, "%s: out of memory for the name", p->ctx);
        memcpy(t->name, name.ptr, (size_t)name.len);
        size_t dup =
            gguf_index_insert(index, t->name, name.len, (size_t)i, gguf_index_key_of_tensor, g->tensors);
        if (dup != GGUF_INDEX_NONE)
            return woolly_fail(p->err, "%s: duplicate tensor name (tensor %" PRIu64 " and tensor %zu)",
                               p->ctx, i, dup);

        if (read_u32(p, &t->n_dims, "n_dims"))
            return -1;
        if (t->n_dims < 1 || t->n_dims > 4)
            return woolly_fail(p->err, "%s: n_dims is %" PRIu32 ", must be 1 to 4", p->ctx, t->n_dims);
        uint64_t n_elems = 1;
        for (uint32_t d = 0; d < 4; d++) {
            t->ne[d] = 1;
            if (d < t->n_dims && read_uint(p, 8, &t->ne[d], "dimension"))
                return -1;
            if (t->ne[d] == 0)
                return woolly_fail(p->err, "%s: dimension %" PRIu32 " is 0", p->ctx, d);
            if (__builtin_mul_overflow(n_elems, t->ne[d], &n_elems) || n_elems > (uint64_t)INT64_MAX)
                return woolly_fail(p->err,
                                   "%s: shape [%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
                                   "] has more than 2^63 elements",
                                   p->ctx, t->ne[0], d >= 1 ? t->ne[1] : 1, d >= 2 ? t->ne[2] : 1,
                                   d >= 3 ? t->ne[3] : 1);
        }
        uint32_t type;
        if (read_u32(p, &type, "type"))
            return -1;
        const woolly_type_info *ti = woolly_type_get(type);
        if (!ti)
            return woolly_fail(p->err, "%s: unknown tensor type %" PRIu32, p->ctx, type);
        t->type = (enum woolly_type)type;
        if (t->ne[0] % ti->block_elems != 0)
            return woolly_fail(p->err,
                               "%s: row length %" PRIu64 " is not a multiple of the %s block size %" PRIu32,
                               p->ctx, t->ne[0], ti->name, ti->block_elems);
        uint64_t n_blocks = n_elems / ti->block_elems;
        if (__builtin_mul_overflow(n_blocks, (uint64_t)ti->block_bytes, &t->nbytes))
            return woolly_fail(p->err, "%s: size of %" PRIu64 " %s blocks overflows 64 bits", p->ctx,
                               n_blocks, ti->name);
        if (read_uint(p, 8, &t->offset, "data offset"))
            return -1;
    }
    return 0;
}

/* Once the data section's start is known: every tensor's data must be aligned and inside it. */
static int check_tensor_data(parser *p, gguf_file *g)
{
    uint64_t data_size = g->data_offset <= p->size ? p->size - g->data_offset : 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment != 0)
            return woolly_fail(
                p->err, "tensor '%s': data offset %" PRIu64 " is not a multiple of the alignment %" PRIu64,
                t->name, t->offset, g->alignment);
        if (t->offset > data_size || t->nbytes > data_size - t->offset)
            return woolly_fail(p->err,
                               "tensor '%s': data at offset %" PRIu64 " (file offset %" PRIu64 ") of %" PRIu64
                               " bytes runs past end of file (size %zu)",
                               t->name, t->offset, g->data_offset + t->offset, t->nbytes, p->size);
        t->data = p->buf + g->data_offset + t->offset;
    }
    return 0;
}

static int parse_all(parser *p, gguf_file *g)
{
    snprintf(p->ctx, sizeof p->ctx, "header");
    if (p->size < 4)
        return woolly_fail(p->err, "file of %zu bytes is too small to be GGUF", p->size);
    if (memcmp(p->buf, GGUF_MAGIC, 4) != 0)
        return woolly_fail(p->err, "bad magic %02x %02x %02x %02x (expected \"GGUF\"): not a GGUF file",
                           p->buf[0], p->buf[1], p->buf[2], p->buf[3]);
    p->pos = 4;
    if (read_u32(p, &g->version, "version"))
        return -1;
    if (g->version != 2 && g->version != 3) {
        if (g->version == 1)
            return woolly_fail(p->err, "GGUF version 1 is not supported (only versions 2 and 3)");
        return woolly_fail(p->err, "unsupported GGUF version %" PRIu32 " (only 2 and 3%s)", g->version,
                           (g->version & 0xffff) == 0 ? "; a big-endian file?" : "");
    }
    if (read_uint(p, 8, &g->n_tensors, "tensor count") || read_uint(p, 8, &g->n_kv, "key/value count"))
        return -1;
    if (parse_kvs(p, g) || read_alignment(p, g) || parse_tensor_infos(p, g))
        return -1;
    uint64_t data_offset = ((uint64_t)p->pos + g->alignment - 1) / g->alignment * g->alignment;
    if (g->n_tensors > 0 && data_offset > p->size)
        return woolly_fail(
            p->err, "the data section would start at offset %" PRIu64 ", past the end of the file (size %zu)",
            data_offset, p->size);
    /* A file without tensors (a vocabulary) may end right after its header, without padding. */
    g->data_offset = data_offset <= p->size ? data_offset : p->size;
    return check_tensor_data(p, g);
}

static gguf_file *parse_raw(const void *buf, size_t size, woolly_error *err)
{
    gguf_file *g = calloc(1, sizeof *g);
    gguf_arena *arena = gguf_arena_new();
    if (!g || !arena) {
        free(g);
        gguf_arena_free(arena);
        woolly_fail(err, "out of memory");
        return NULL;
    }
    g->arena = arena;
    g->fd = -1;
    g->buf = buf;
    g->size = size;
    parser p = {.buf = buf, .size = size, .err = err, .arena = arena};
    if (parse_all(&p, g)) {
        gguf_close(g);
        return NULL;
    }
    return g;
}

gguf_file *gguf_parse(const void *buf, size_t size, woolly_error *err)
{
    woolly_error raw = {{0}};
    gguf_file *g = parse_raw(buf, size, &raw);
    if (!g)
        woolly_fail(err, "gguf: %s", raw.msg);
    return g;
}

gguf_file *gguf_open(const char *path, woolly_error *err)
{
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer forever; this way it opens at once
     * and the file-type check below refuses it (a regular file ignores the flag, and is only mapped). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        woolly_fail(err, "gguf: cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        woolly_fail(err, "gguf: cannot stat '%s': %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        woolly_fail(err, "gguf: '%s' is not a regular file", path);
        close(fd);
        return NULL;
    }
    if (st.st_size == 0) {
        woolly_fail(err, "gguf: '%s' is empty", path);
        close(fd);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    /* Mapped for huge pages: the matrices used as they are in the file (F16, F32) are streamed from
     * this mapping on every token. With the advice, a file read on first use (a cold page cache) comes
     * in 2 MiB folios mapped by single entries: llama-1b-F16's first load after the cache was dropped
     * mapped 1.8 of its 2.0 GB so, against 0.5 GB without, and decoded 16-24% faster (journal,
     * 2026-12-04-zen5-4). Not populated: the matrices a load repacks are read with gguf_read. */
    woolly_huge_map map;
    const void *data = woolly_huge_map_file(&map, fd, 0, size, 0);
    if (!data) {
        woolly_fail(err, "gguf: cannot map '%s' (%zu bytes): %s", path, size, strerror(errno));
        close(fd);
        return NULL;
    }
    woolly_error raw = {{0}};
    gguf_file *g = parse_raw(data, size, &raw);
    if (!g) {
        woolly_huge_map_close(&map);
        close(fd);
        woolly_fail(err, "gguf: %s: %s", path, raw.msg);
        return NULL;
    }
    g->map = map;
    g->fd = fd;
    return g;
}

void gguf_close(gguf_file *g)
{
    if (!g)
        return;
    woolly_huge_map_close(&g->map);
    if (g->fd >= 0)
        close(g->fd);
    gguf_arena_free(g->arena);
    free(g);
}

int gguf_read(const gguf_file *g, const void *src, size_t n, void *dst, woolly_error *err)
{
    const size_t off = (size_t)((const uint8_t *)src - g->buf);
    if (off > g->size || n > g->size - off)
        return woolly_fail(err, "gguf: read of %zu bytes at offset %zu is past the end of the file", n, off);
    if (g->fd < 0) {
        memcpy(dst, src, n);
        return 0;
    }
    for (size_t done = 0; done < n;) {
        const ssize_t r = pread(g->fd, (uint8_t *)dst + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return woolly_fail(err, "gguf: cannot read %zu bytes at offset %zu: %s", n - done, off + done,
                               r < 0 ? strerror(errno) : "the file is shorter than when it was opened");
        done += (size_t)r;
    }
    return 0;
}

const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key)
{
    const gguf_arena *a = g ? g->arena : NULL;
    if (!a || !a->kv_index)
        return NULL;
    size_t i = gguf_index_find(a->kv_index, key, strlen(key), gguf_index_key_of_kv, g->kv);
    return i == GGUF_INDEX_NONE ? NULL : &g->kv[i];
}

const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name)
{
    const gguf_arena *a = g ? g->arena : NULL;
    if (!a || !a->tensor_index)
        return NULL;
    size_t i = gguf_index_find(a->tensor_index, name, strlen(name), gguf_index_key_of_tensor, g->tensors);
    return i == GGUF_INDEX_NONE ? NULL : &g->tensors[i];
}

/* Common start of the typed getters: the kv, or NULL (absent: err cleared). */
static const gguf_kv *getter_kv(const gguf_file *g, const char *key, woolly_error *err)
{
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv && err)
        err->msg[0] = 0;
    return kv;
}

bool gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out, woolly_error *err)
{
    const gguf_kv *kv = getter_kv(g, key, err);
    if (!kv)
        return false;
    const gguf_value *v = &kv->value;
    enum gguf_vtype t = v->type;
    if (gguf_vtype_size(t) == 0 || t == GGUF_BOOL || t == GGUF_F32 || t == GGUF_F64) {
        woolly_fail(err, "gguf: key '%s' has type %s, expected an integer", key, gguf_vtype_name(t));
        return false;
    }
    if (is_signed(t) ? (v->v.i64 < 0 || v->v.i64 > (int64_t)UINT32_MAX) : v->v.u64 > UINT32_MAX) {
        if (is_signed(t))
            woolly_fail(err, "gguf: key '%s' is %" PRId64 ", out of the range 0..4294967295", key, v->v.i64);
        else
            woolly_fail(err, "gguf: key '%s' is %" PRIu64 ", out of the range 0..4294967295", key, v->v.u64);
        return false;
    }
    *out = (uint32_t)(is_signed(t) ? (uint64_t)v->v.i64 : v->v.u64);
    return true;
}

bool gguf_get_f32(const gguf_file *g, const char *key, float *out, woolly_error *err)
{
    const gguf_kv *kv = getter_kv(g, key, err);
    if (!kv)
        return false;
    if (kv->value.type != GGUF_F32 && kv->value.type != GGUF_F64) {
        woolly_fail(err, "gguf: key '%s' has type %s, expected f32", key, gguf_vtype_name(kv->value.type));
        return false;
    }
    *out = (float)kv->value.v.f64;
    return true;
}

bool gguf_get_bool(const gguf_file *g, const char *key, bool *out, woolly_error *err)
{
    const gguf_kv *kv = getter_kv(g, key, err);
    if (!kv)
        return false;
    if (kv->value.type != GGUF_BOOL) {
        woolly_fail(err, "gguf: key '%s' has type %s, expected bool", key, gguf_vtype_name(kv->value.type));
        return false;
    }
    *out = kv->value.v.u64 != 0;
    return true;
}

bool gguf_get_str(const gguf_file *g, const char *key, gguf_str *out, woolly_error *err)
{
    const gguf_kv *kv = getter_kv(g, key, err);
    if (!kv)
        return false;
    if (kv->value.type != GGUF_STRING) {
        woolly_fail(err, "gguf: key '%s' has type %s, expected string", key, gguf_vtype_name(kv->value.type));
        return false;
    }
    *out = kv->value.v.str;
    return true;
}

bool gguf_get_arr(const gguf_file *g, const char *key, enum gguf_vtype elem, const gguf_array **out,
                  woolly_error *err)
{
    const gguf_kv *kv = getter_kv(g, key, err);
    if (!kv)
        return false;
    if (kv->value.type != GGUF_ARRAY) {
        woolly_fail(err, "gguf: key '%s' has type %s, expected an array of %s", key,
                    gguf_vtype_name(kv->value.type), gguf_vtype_name(elem));
        return false;
    }
    if (kv->value.v.arr.type != elem) {
        woolly_fail(err, "gguf: key '%s' is an array of %s, expected an array of %s", key,
                    gguf_vtype_name(kv->value.v.arr.type), gguf_vtype_name(elem));
        return false;
    }
    *out = &kv->value.v.arr;
    return true;
}

static bool arr_elem(const gguf_array *a, uint64_t i, gguf_value *out)
{
    int s = gguf_vtype_size(a->type);
    if (s == 0 || a->n == 0 || !a->data)
        return false;
    if (i >= a->n)
        i = a->n - 1;
    decode_scalar(a->type, (const uint8_t *)a->data + i * (uint64_t)s, out);
    return true;
}

double gguf_arr_f64(const gguf_array *a, uint64_t i)
{
    gguf_value v;
    if (!arr_elem(a, i, &v))
        return 0.0;
    if (v.type == GGUF_F32 || v.type == GGUF_F64)
        return v.v.f64;
    return is_signed(v.type) ? (double)v.v.i64 : (double)v.v.u64;
}

int64_t gguf_arr_i64(const gguf_array *a, uint64_t i)
{
    gguf_value v;
    if (!arr_elem(a, i, &v))
        return 0;
    if (v.type == GGUF_F32 || v.type == GGUF_F64) {
        /* Saturate: a float-to-integer conversion out of range is undefined. */
        if (!(v.v.f64 > -9.2e18))
            return v.v.f64 != v.v.f64 ? 0 : INT64_MIN;
        return v.v.f64 < 9.2e18 ? (int64_t)v.v.f64 : INT64_MAX;
    }
    return is_signed(v.type) ? v.v.i64 : (int64_t)v.v.u64;
}

bool gguf_str_eq(gguf_str s, const char *z)
{
    size_t n = strlen(z);
    return s.len == n && (n == 0 || memcmp(s.ptr, z, n) == 0);
}

const char *gguf_vtype_name(enum gguf_vtype t)
{
    static const char *const NAMES[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    if ((unsigned)t < sizeof NAMES / sizeof NAMES[0])
        return NAMES[t];
    return "unknown";
}
