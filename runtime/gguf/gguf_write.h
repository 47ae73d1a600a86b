/* GGUF v3 writer. Streams: metadata and tensor infos are declared first, then the header is written,
 * then tensor data is written in declaration order, so a large model never has to be in memory.
 *
 *   gguf_writer *w = gguf_writer_open("out.gguf", &err);
 *   gguf_writer_set_str(w, "general.architecture", "llama");
 *   gguf_writer_add_tensor(w, "token_embd.weight", WOOLLY_TYPE_Q4_K, 2, ne);
 *   gguf_writer_write_header(w, &err);
 *   gguf_writer_write_data(w, bytes, n, &err);   (per tensor, in order, exactly its size)
 *   gguf_writer_close(w, &err);                   (pads, flushes, checks every tensor was written)
 *
 * Setters copy their arguments; setting a key twice replaces the value (order of first set kept). */
#ifndef WOOLLY_GGUF_WRITE_H
#define WOOLLY_GGUF_WRITE_H

#include "gguf.h"

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_open(const char *path, woolly_error *err);

void gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
void gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
void gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
void gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n);
void gguf_writer_set_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n);
void gguf_writer_set_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
/* Copies a key/value (any type, nested arrays included) from a parsed file, e.g. the tokenizer. */
void gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv);

/* ne[0] is the row length. Returns the tensor's index, -1 on a bad shape/type (message in the
 * writer's sticky error, reported by write_header). */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, enum woolly_type type, uint32_t n_dims,
                           const uint64_t *ne);

int gguf_writer_write_header(gguf_writer *w, woolly_error *err);
/* Appends tensor bytes; a tensor may be written in several calls. */
int gguf_writer_write_data(gguf_writer *w, const void *data, size_t n, woolly_error *err);
/* Finishes and frees the writer (also on error). Returns 0 on success. */
int gguf_writer_close(gguf_writer *w, woolly_error *err);

#endif
