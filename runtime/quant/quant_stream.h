/* Writing a model's tensors tensor by tensor, converting rows on several threads: the engine of
 * `woolly quantize` (rows from the input file) and `woolly synth` (rows from a random generator).
 *
 * A tensor's rows come from a row function, called from several threads at once for distinct rows, or
 * from bytes copied as they are. Rows are converted in chunks of a few MB, each chunk split into
 * contiguous row ranges, one per thread, then written in order; memory stays bounded by the chunk and
 * the output never depends on the number of threads. */
#ifndef WOOLLY_QUANT_STREAM_H
#define WOOLLY_QUANT_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "gguf_write.h"
#include "wtype.h"

/* Fills row `row` (ne[0] floats) of the tensor. Returns 0, or -1 with a message in err. */
typedef int (*woolly_row_fn)(void *ctx, int64_t row, float *dst, woolly_error *err);

/* The row function of a tensor read from a GGUF file: ctx is its `const gguf_tensor *`, whose rows are
 * dequantized to floats. */
int woolly_stream_gguf_row(void *ctx, int64_t row, float *dst, woolly_error *err);

typedef struct woolly_stream_tensor {
    const char *name;
    enum woolly_type type; /* as written */
    uint32_t n_dims;
    uint64_t ne[4];     /* ne[0] is the row length; unused dims are 1 */
    woolly_row_fn rows; /* float rows to convert to `type`... */
    void *ctx;
    const void *raw; /* ...or, when rows is NULL, the tensor's bytes in `type` already */
    /* NULL, or the importance of each column (ne[0] floats) per matrix of ne[1] rows (ne[2] * ne[3]
     * matrices: an expert's rows use their own), which weighs the rounding errors of converted rows */
    const float *importance;
} woolly_stream_tensor;

/* Called before each tensor is converted (index counts from 0). */
typedef void (*woolly_stream_progress_fn)(void *ctx, size_t index, size_t n, const woolly_stream_tensor *t);

/* Declares the tensors to the writer (gguf_writer_add_tensor, in order). */
int woolly_stream_declare(gguf_writer *w, const woolly_stream_tensor *t, size_t n, woolly_error *err);

/* After gguf_writer_write_header: converts and writes every tensor's data, in order. n_threads >= 1. */
int woolly_stream_write(gguf_writer *w, const woolly_stream_tensor *t, size_t n, int n_threads,
                        woolly_stream_progress_fn progress, void *progress_ctx, woolly_error *err);

/* Bytes of a tensor in its type; 0 if its row length is not a whole number of blocks. */
uint64_t woolly_stream_tensor_bytes(const woolly_stream_tensor *t);

#endif
