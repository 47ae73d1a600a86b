/* GGUF v3 writer. Each key's value is kept already encoded (value type + payload, exactly as it will
 * be written), which makes copying any value from a parsed file, nested arrays included, the same
 * operation as setting a scalar. The file is written to "<path>.tmp" and renamed when complete, so a
 * failed write never leaves a half file under the real name (nor clobbers a model being read from). */
#include "gguf_write.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_WRITE_VERSION 3
#define GGUF_WRITE_ALIGNMENT 32
/* The same limit as the reader's: deeper values could not be read back. */
#define GGUF_WRITE_MAX_DEPTH 8

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} bytes;

typedef struct wkv {
    char *key;
    bytes val; /* u32 value type, then the payload */
} wkv;

typedef struct wtensor {
    char *name;
    enum woolly_type type;
    uint32_t n_dims;
    uint64_t ne[4];
    uint64_t nbytes;
    uint64_t offset; /* in the data section */
} wtensor;

struct gguf_writer {
    char *path, *tmp_path;
    FILE *f;
    woolly_error err; /* sticky: the first problem, reported by write_header/write_data/close */
    bool failed;
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    uint64_t data_size; /* declared, padded */
    uint64_t alignment;
    bool header_written;
    size_t cur;        /* tensor being written */
    uint64_t cur_done; /* its bytes written so far */
    uint64_t data_pos; /* bytes written into the data section */
};

static void wfail(gguf_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wfail(gguf_writer *w, const char *fmt, ...)
{
    if (w->failed)
        return;
    w->failed = true;
    char msg[sizeof w->err.msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    woolly_fail(&w->err, "gguf write '%s': %s", w->path, msg);
}

static void put(bytes *b, const void *p, size_t n)
{
    if (b->oom)
        return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void put_le(bytes *b, uint64_t v, int n)
{
    uint8_t le[8];
    for (int i = 0; i < n; i++)
        le[i] = (uint8_t)(v >> (8 * i));
    put(b, le, (size_t)n);
}

static void put_str(bytes *b, const char *s, uint64_t len)
{
    put_le(b, len, 8);
    put(b, s, (size_t)len);
}

static void put_scalar(bytes *b, const gguf_value *v)
{
    int n = gguf_vtype_size(v->type);
    if (v->type == GGUF_F32) {
        float f = (float)v->v.f64;
        uint32_t u;
        memcpy(&u, &f, 4);
        put_le(b, u, 4);
    } else if (v->type == GGUF_F64) {
        uint64_t u;
        memcpy(&u, &v->v.f64, 8);
        put_le(b, u, 8);
    } else if (v->type == GGUF_BOOL) {
        put_le(b, v->v.u64 != 0, 1);
    } else if (v->type == GGUF_I8 || v->type == GGUF_I16 || v->type == GGUF_I32 || v->type == GGUF_I64) {
        put_le(b, (uint64_t)v->v.i64, n);
    } else {
        put_le(b, v->v.u64, n);
    }
}

/* Array payload: element type, count, elements. Numeric elements are copied as packed little-endian
 * bytes (as the reader hands them out). Returns false on a value that cannot be written. */
static bool put_array(gguf_writer *w, bytes *b, const char *key, const gguf_array *a, int depth)
{
    if (depth > GGUF_WRITE_MAX_DEPTH) {
        wfail(w, "key '%s': arrays nested more than %d deep", key, GGUF_WRITE_MAX_DEPTH);
        return false;
    }
    put_le(b, (uint32_t)a->type, 4);
    put_le(b, a->n, 8);
    int es = gguf_vtype_size(a->type);
    if (es > 0) {
        if (a->n > 0 && !a->data) {
            wfail(w, "key '%s': array of %" PRIu64 " %s without data", key, a->n, gguf_vtype_name(a->type));
            return false;
        }
        if (a->n > SIZE_MAX / (size_t)es) {
            wfail(w, "key '%s': array of %" PRIu64 " elements is too large", key, a->n);
            return false;
        }
        put(b, a->data, (size_t)a->n * (size_t)es);
        return true;
    }
    if (a->type == GGUF_STRING) {
        for (uint64_t i = 0; i < a->n; i++)
            put_str(b, a->strs[i].ptr, a->strs[i].len);
        return true;
    }
    if (a->type == GGUF_ARRAY) {
        for (uint64_t i = 0; i < a->n; i++)
            if (!put_array(w, b, key, &a->items[i].v.arr, depth + 1))
                return false;
        return true;
    }
    wfail(w, "key '%s': array of unknown element type %d", key, (int)a->type);
    return false;
}

gguf_writer *gguf_writer_open(const char *path, woolly_error *err)
{
    gguf_writer *w = calloc(1, sizeof *w);
    size_t n = strlen(path);
    if (w) {
        w->path = malloc(n + 1);
        w->tmp_path = malloc(n + 5);
    }
    if (!w || !w->path || !w->tmp_path) {
        woolly_fail(err, "gguf write '%s': out of memory", path);
        if (w) {
            free(w->path);
            free(w->tmp_path);
        }
        free(w);
        return NULL;
    }
    memcpy(w->path, path, n + 1);
    memcpy(w->tmp_path, path, n);
    memcpy(w->tmp_path + n, ".tmp", 5);
    w->f = fopen(w->tmp_path, "wb");
    if (!w->f) {
        woolly_fail(err, "gguf write: cannot create '%s': %s", w->tmp_path, strerror(errno));
        free(w->path);
        free(w->tmp_path);
        free(w);
        return NULL;
    }
    w->alignment = GGUF_WRITE_ALIGNMENT;
    return w;
}

/* The entry for `key`, created (at the end, keeping first-set order) if new, emptied if not. */
static wkv *kv_slot(gguf_writer *w, const char *key)
{
    if (w->failed)
        return NULL;
    if (w->header_written) {
        wfail(w, "key '%s' set after the header was written", key);
        return NULL;
    }
    if (!key[0]) {
        wfail(w, "empty key");
        return NULL;
    }
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) {
            w->kv[i].val.n = 0;
            return &w->kv[i];
        }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
        wkv *kv = realloc(w->kv, cap * sizeof *kv);
        if (!kv) {
            wfail(w, "out of memory for key '%s'", key);
            return NULL;
        }
        w->kv = kv;
        w->cap_kv = cap;
    }
    wkv *kv = &w->kv[w->n_kv];
    memset(kv, 0, sizeof *kv);
    kv->key = strdup(key);
    if (!kv->key) {
        wfail(w, "out of memory for key '%s'", key);
        return NULL;
    }
    w->n_kv++;
    return kv;
}

static void check_oom(gguf_writer *w, wkv *kv)
{
    if (kv->val.oom)
        wfail(w, "out of memory for the value of key '%s'", kv->key);
}

static void set_scalar(gguf_writer *w, const char *key, gguf_value v)
{
    if (!w)
        return;
    wkv *kv = kv_slot(w, key);
    if (!kv)
        return;
    put_le(&kv->val, (uint32_t)v.type, 4);
    put_scalar(&kv->val, &v);
    check_oom(w, kv);
}

void gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v)
{
    set_scalar(w, key, (gguf_value){.type = GGUF_U32, .v.u64 = v});
}

void gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v)
{
    set_scalar(w, key, (gguf_value){.type = GGUF_I32, .v.i64 = v});
}

void gguf_writer_set_f32(gguf_writer *w, const char *key, float v)
{
    set_scalar(w, key, (gguf_value){.type = GGUF_F32, .v.f64 = v});
}

void gguf_writer_set_bool(gguf_writer *w, const char *key, bool v)
{
    set_scalar(w, key, (gguf_value){.type = GGUF_BOOL, .v.u64 = v});
}

void gguf_writer_set_str(gguf_writer *w, const char *key, const char *v)
{
    gguf_value val = {.type = GGUF_STRING, .v.str = {v, strlen(v)}};
    gguf_writer_copy_kv(w, &(gguf_kv){.key = {key, strlen(key)}, .value = val});
}

static void set_array(gguf_writer *w, const char *key, gguf_array a)
{
    gguf_value val = {.type = GGUF_ARRAY, .v.arr = a};
    gguf_writer_copy_kv(w, &(gguf_kv){.key = {key, strlen(key)}, .value = val});
}

void gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n)
{
    if (!w)
        return;
    gguf_str *strs = n && n <= SIZE_MAX / sizeof *strs ? malloc((size_t)n * sizeof *strs) : NULL;
    if (n && !strs) {
        wfail(w, "out of memory for key '%s'", key);
        return;
    }
    for (uint64_t i = 0; i < n; i++)
        strs[i] = (gguf_str){v[i], strlen(v[i])};
    set_array(w, key, (gguf_array){.type = GGUF_STRING, .n = n, .strs = strs});
    free(strs);
}

void gguf_writer_set_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n)
{
    set_array(w, key, (gguf_array){.type = GGUF_F32, .n = n, .data = v});
}

void gguf_writer_set_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n)
{
    set_array(w, key, (gguf_array){.type = GGUF_I32, .n = n, .data = v});
}

void gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *src)
{
    if (!w)
        return;
    char *key = malloc((size_t)src->key.len + 1);
    if (!key) {
        wfail(w, "out of memory for a key");
        return;
    }
    memcpy(key, src->key.ptr, (size_t)src->key.len);
    key[src->key.len] = 0;
    if (strlen(key) != src->key.len) {
        wfail(w, "key '%s' contains a NUL byte", key);
        free(key);
        return;
    }
    wkv *kv = kv_slot(w, key);
    if (kv) {
        const gguf_value *v = &src->value;
        put_le(&kv->val, (uint32_t)v->type, 4);
        if (gguf_vtype_size(v->type) > 0)
            put_scalar(&kv->val, v);
        else if (v->type == GGUF_STRING)
            put_str(&kv->val, v->v.str.ptr, v->v.str.len);
        else if (v->type == GGUF_ARRAY)
            put_array(w, &kv->val, key, &v->v.arr, 1);
        else
            wfail(w, "key '%s' has unknown value type %d", key, (int)v->type);
        check_oom(w, kv);
    }
    free(key);
}

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, enum woolly_type type, uint32_t n_dims,
                           const uint64_t *ne)
{
    if (!w || w->failed)
        return -1;
    if (w->header_written) {
        wfail(w, "tensor '%s' added after the header was written", name);
        return -1;
    }
    if (!name[0]) {
        wfail(w, "tensor with an empty name");
        return -1;
    }
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) {
            wfail(w, "tensor '%s' added twice", name);
            return -1;
        }
    const woolly_type_info *ti = woolly_type_get((uint32_t)type);
    if (!ti) {
        wfail(w, "tensor '%s': unknown type %d", name, (int)type);
        return -1;
    }
    if (n_dims < 1 || n_dims > 4) {
        wfail(w, "tensor '%s': n_dims %" PRIu32 " is not 1 to 4", name, n_dims);
        return -1;
    }
    wtensor t = {.type = type, .n_dims = n_dims, .ne = {1, 1, 1, 1}};
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        t.ne[d] = ne[d];
        if (ne[d] == 0 || __builtin_mul_overflow(n, ne[d], &n) || n > (uint64_t)INT64_MAX) {
            wfail(w, "tensor '%s': dimension %" PRIu32 " of %" PRIu64 " is zero or overflows", name, d,
                  ne[d]);
            return -1;
        }
    }
    if (t.ne[0] % ti->block_elems != 0) {
        wfail(w, "tensor '%s': row length %" PRIu64 " is not a multiple of the %s block size %" PRIu32, name,
              t.ne[0], ti->name, ti->block_elems);
        return -1;
    }
    if (__builtin_mul_overflow(n / ti->block_elems, (uint64_t)ti->block_bytes, &t.nbytes) ||
        t.nbytes > UINT64_MAX / 2) {
        wfail(w, "tensor '%s': size overflows", name);
        return -1;
    }
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *q = realloc(w->t, cap * sizeof *q);
        if (!q) {
            wfail(w, "out of memory for tensor '%s'", name);
            return -1;
        }
        w->t = q;
        w->cap_t = cap;
    }
    t.name = strdup(name);
    if (!t.name) {
        wfail(w, "out of memory for tensor '%s'", name);
        return -1;
    }
    w->t[w->n_t] = t;
    return (int)w->n_t++;
}

static int report(gguf_writer *w, woolly_error *err)
{
    if (err)
        *err = w->err;
    return -1;
}

static void write_bytes(gguf_writer *w, const void *p, size_t n)
{
    if (w->failed || n == 0)
        return;
    if (fwrite(p, 1, n, w->f) != n)
        wfail(w, "write failed: %s", strerror(errno));
}

static void write_zeros(gguf_writer *w, uint64_t n)
{
    static const uint8_t ZEROS[64];
    while (n > 0 && !w->failed) {
        size_t k = n < sizeof ZEROS ? (size_t)n : sizeof ZEROS;
        write_bytes(w, ZEROS, k);
        n -= k;
    }
}

/* A general.alignment set by the caller (e.g. copied from another file) is honoured. */
static void choose_alignment(gguf_writer *w)
{
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment") != 0)
            continue;
        const uint8_t *v = w->kv[i].val.p;
        uint32_t type = (uint32_t)v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 | (uint32_t)v[3] << 24;
        if (type != GGUF_U32) {
            wfail(w, "general.alignment must be a u32, not %s", gguf_vtype_name((enum gguf_vtype)type));
            return;
        }
        uint32_t a = (uint32_t)v[4] | (uint32_t)v[5] << 8 | (uint32_t)v[6] << 16 | (uint32_t)v[7] << 24;
        if (a == 0 || (a & (a - 1)) != 0) {
            wfail(w, "general.alignment %" PRIu32 " is not a power of two", a);
            return;
        }
        w->alignment = a;
    }
}

int gguf_writer_write_header(gguf_writer *w, woolly_error *err)
{
    if (w->header_written)
        wfail(w, "header written twice");
    choose_alignment(w);
    if (w->failed)
        return report(w, err);
    bytes h = {0};
    put(&h, "GGUF", 4);
    put_le(&h, GGUF_WRITE_VERSION, 4);
    put_le(&h, w->n_t, 8);
    put_le(&h, w->n_kv, 8);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(&h, w->kv[i].key, strlen(w->kv[i].key));
        put(&h, w->kv[i].val.p, w->kv[i].val.n);
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        wtensor *t = &w->t[i];
        t->offset = offset;
        put_str(&h, t->name, strlen(t->name));
        put_le(&h, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put_le(&h, t->ne[d], 8);
        put_le(&h, (uint32_t)t->type, 4);
        put_le(&h, t->offset, 8);
        offset = align_up(offset + t->nbytes, w->alignment);
    }
    w->data_size = offset;
    if (h.oom) {
        free(h.p);
        wfail(w, "out of memory for the header");
        return report(w, err);
    }
    write_bytes(w, h.p, h.n);
    /* The data section starts aligned; a file without tensors ends with its header. */
    if (w->n_t > 0)
        write_zeros(w, align_up(h.n, w->alignment) - h.n);
    free(h.p);
    w->header_written = true;
    return w->failed ? report(w, err) : 0;
}

int gguf_writer_write_data(gguf_writer *w, const void *data, size_t n, woolly_error *err)
{
    if (!w->header_written)
        wfail(w, "tensor data written before the header");
    const uint8_t *p = data;
    while (n > 0 && !w->failed) {
        if (w->cur >= w->n_t) {
            wfail(w, "%zu bytes of data beyond the %zu declared tensors", n, w->n_t);
            break;
        }
        wtensor *t = &w->t[w->cur];
        uint64_t left = t->nbytes - w->cur_done;
        size_t k = n < left ? n : (size_t)left;
        write_bytes(w, p, k);
        p += k;
        n -= k;
        w->cur_done += k;
        w->data_pos += k;
        if (w->cur_done == t->nbytes) {
            /* Pad to the next tensor's offset (or to the file's aligned end after the last one). */
            uint64_t end = align_up(t->offset + t->nbytes, w->alignment);
            write_zeros(w, end - w->data_pos);
            w->data_pos = end;
            w->cur++;
            w->cur_done = 0;
        }
    }
    return w->failed ? report(w, err) : 0;
}

static void free_writer(gguf_writer *w)
{
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val.p);
    }
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w->path);
    free(w->tmp_path);
    free(w);
}

int gguf_writer_close(gguf_writer *w, woolly_error *err)
{
    if (!w)
        return 0;
    if (!w->failed && !w->header_written)
        wfail(w, "closed before the header was written");
    if (!w->failed && w->cur < w->n_t)
        wfail(w,
              "closed with tensor '%s' incomplete: %" PRIu64 " of %" PRIu64
              " bytes written (%zu of %zu tensors done)",
              w->t[w->cur].name, w->cur_done, w->t[w->cur].nbytes, w->cur, w->n_t);
    if (fflush(w->f) != 0)
        wfail(w, "write failed: %s", strerror(errno));
    if (fclose(w->f) != 0)
        wfail(w, "close failed: %s", strerror(errno));
    if (!w->failed && rename(w->tmp_path, w->path) != 0)
        wfail(w, "cannot rename '%s' to it: %s", w->tmp_path, strerror(errno));
    int rc = 0;
    if (w->failed) {
        remove(w->tmp_path);
        rc = report(w, err);
    }
    free_writer(w);
    return rc;
}
