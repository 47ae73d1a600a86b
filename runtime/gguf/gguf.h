/* GGUF v2/v3 reader. The parser works on a byte buffer (mapped file, or a heap buffer in tests and the
 * fuzzer) and validates everything before handing it out: after gguf_parse succeeds, every string,
 * array and tensor pointer it returns lies inside the buffer, and every tensor's data range is in the
 * data section, aligned, and as large as its type and shape say. All strings point into the buffer and
 * are not NUL-terminated, except the tensor names, which are copied (they are looked up often). */
#ifndef WOOLLY_GGUF_H
#define WOOLLY_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "huge_map.h"
#include "wtype.h"

enum gguf_vtype {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10, GGUF_I64 = 11,
    GGUF_F64 = 12,
};

typedef struct gguf_str {
    const char *ptr; /* into the buffer; not NUL-terminated */
    uint64_t len;
} gguf_str;

typedef struct gguf_value gguf_value;

typedef struct gguf_array {
    enum gguf_vtype type; /* element type */
    uint64_t n;
    const void *data;         /* numeric/bool elements: packed little-endian, into the buffer */
    const gguf_str *strs;     /* GGUF_STRING elements: n entries (allocated by the parser) */
    const gguf_value *items;  /* GGUF_ARRAY elements: n nested arrays (allocated by the parser) */
} gguf_array;

struct gguf_value {
    enum gguf_vtype type;
    union {
        uint64_t u64; /* U8, U16, U32, U64, BOOL (0/1) */
        int64_t i64;  /* I8, I16, I32, I64 */
        double f64;   /* F32, F64 */
        gguf_str str;
        gguf_array arr;
    } v;
};

typedef struct gguf_kv {
    gguf_str key;
    gguf_value value;
} gguf_kv;

typedef struct gguf_tensor {
    char *name;            /* NUL-terminated copy */
    uint32_t n_dims;       /* 1..4 */
    uint64_t ne[4];        /* ne[0] is the row length (contiguous); unused dims are 1 */
    enum woolly_type type;
    uint64_t offset;       /* relative to the data section, as stored */
    uint64_t nbytes;
    const void *data;      /* into the buffer */
} gguf_tensor;

typedef struct gguf_file {
    uint32_t version;
    uint64_t n_kv;
    gguf_kv *kv;
    uint64_t n_tensors;
    gguf_tensor *tensors;
    uint64_t alignment;   /* general.alignment or 32 */
    uint64_t data_offset; /* start of the data section in the buffer */
    const uint8_t *buf;
    size_t size;
    /* private */
    woolly_huge_map map;  /* base non-NULL when gguf_open mapped the file */
    int fd;               /* the open file when gguf_open mapped it (for gguf_read), else -1 */
    void *arena;          /* parser-owned allocations */
} gguf_file;

/* Copies the n bytes of tensor data at src (a pointer into g->buf) to dst. From a file that gguf_open
 * mapped, with pread: the bytes come from the page cache without faulting the mapping's pages into the
 * process (the repack at load reads every weight once; model_repack.c). -1 with a message if the file
 * is shorter than its header said. */
int gguf_read(const gguf_file *g, const void *src, size_t n, void *dst, woolly_error *err);

/* Parses `size` bytes at `buf` (which must outlive the result). NULL with a message on any problem. */
gguf_file *gguf_parse(const void *buf, size_t size, woolly_error *err);

/* mmaps `path` read-only and parses it; the messages name the path. */
gguf_file *gguf_open(const char *path, woolly_error *err);

void gguf_close(gguf_file *g);

/* Look-ups: NULL if absent. `key` is NUL-terminated. */
const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name);

/* Typed getters. Each returns true and stores the value if the key exists with a compatible type
 * (any integer type for the integer getters when the value fits; F32/F64 for gguf_get_f32), false if
 * the key is absent. A key that exists with an incompatible type or value is an error: false and a
 * message in `err` naming the key (check err->msg[0] to tell it from absence). */
bool gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out, woolly_error *err);
bool gguf_get_f32(const gguf_file *g, const char *key, float *out, woolly_error *err);
bool gguf_get_bool(const gguf_file *g, const char *key, bool *out, woolly_error *err);
bool gguf_get_str(const gguf_file *g, const char *key, gguf_str *out, woolly_error *err);
/* Array of the given element type. */
bool gguf_get_arr(const gguf_file *g, const char *key, enum gguf_vtype elem, const gguf_array **out,
                  woolly_error *err);

/* Element i of a numeric array as double / int64 (no bounds check beyond an assert-free clamp:
 * callers check i < arr->n). */
double gguf_arr_f64(const gguf_array *a, uint64_t i);
int64_t gguf_arr_i64(const gguf_array *a, uint64_t i);

/* True if `s` equals the NUL-terminated `z`. */
bool gguf_str_eq(gguf_str s, const char *z);

const char *gguf_vtype_name(enum gguf_vtype t);
/* Bytes of a scalar value type; 0 for strings, arrays and unknown types. */
int gguf_vtype_size(uint32_t t);

#endif
