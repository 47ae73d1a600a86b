#include "quant_stream.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"

int woolly_stream_gguf_row(void *ctx, int64_t row, float *dst, woolly_error *err)
{
    const gguf_tensor *t = ctx;
    const size_t row_bytes = woolly_row_bytes(t->type, (int64_t)t->ne[0]);
    if (woolly_dequantize_row(t->type, (const uint8_t *)t->data + (size_t)row * row_bytes, dst,
                              (int64_t)t->ne[0]) != 0)
        return woolly_fail(err, "tensor '%s': cannot read rows of type %s", t->name,
                           woolly_type_get(t->type)->name);
    return 0;
}

/* Output bytes converted per chunk: large enough that starting threads costs nothing, small enough
 * that memory stays bounded whatever the model. */
#define CHUNK_BYTES (16u << 20)

uint64_t woolly_stream_tensor_bytes(const woolly_stream_tensor *t)
{
    const uint64_t row = woolly_row_bytes(t->type, (int64_t)t->ne[0]);
    return row * t->ne[1] * t->ne[2] * t->ne[3];
}

int woolly_stream_declare(gguf_writer *w, const woolly_stream_tensor *t, size_t n, woolly_error *err)
{
    for (size_t i = 0; i < n; i++) {
        if (woolly_row_bytes(t[i].type, (int64_t)t[i].ne[0]) == 0)
            return woolly_fail(err, "tensor '%s': row length %llu is not a multiple of %s's block of %u",
                               t[i].name, (unsigned long long)t[i].ne[0], woolly_type_get(t[i].type)->name,
                               woolly_type_get(t[i].type)->block_elems);
        if (t[i].rows && !woolly_can_quantize(t[i].type))
            return woolly_fail(err, "tensor '%s': cannot convert rows to %s", t[i].name,
                               woolly_type_get(t[i].type)->name);
        if (gguf_writer_add_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne) < 0)
            return woolly_fail(err, "tensor '%s': the GGUF writer refused it", t[i].name);
    }
    return 0;
}

/* One thread's share of a chunk: rows [r0, r1) of tensor t into out (row r at (r - r0) * row_bytes). */
typedef struct {
    const woolly_stream_tensor *t;
    int64_t r0, r1;
    uint8_t *out;
    int status;
    woolly_error err;
} chunk_job;

static void *convert_rows(void *arg)
{
    chunk_job *j = arg;
    const int64_t k = (int64_t)j->t->ne[0];
    const size_t row_bytes = woolly_row_bytes(j->t->type, k);
    float *buf = malloc(sizeof(float) * (size_t)k);
    if (!buf) {
        j->status = woolly_fail(&j->err, "tensor '%s': out of memory for a row of %lld floats", j->t->name,
                                (long long)k);
        return NULL;
    }
    for (int64_t r = j->r0; r < j->r1 && j->status == 0; r++) {
        if (j->t->rows(j->t->ctx, r, buf, &j->err) != 0)
            j->status = -1;
        else
            woolly_quantize_row_weighted(j->t->type, buf, j->out + (size_t)(r - j->r0) * row_bytes, k,
                                         j->t->importance ? j->t->importance + (r / (int64_t)j->t->ne[1]) * k
                                                          : NULL);
    }
    free(buf);
    return NULL;
}

/* Rows [r0, r1) split into n_threads contiguous ranges, converted in parallel into out. */
static int convert_chunk(const woolly_stream_tensor *t, int64_t r0, int64_t r1, uint8_t *out, int n_threads,
                         woolly_error *err)
{
    chunk_job jobs[64];
    pthread_t tid[64];
    bool started[64] = {false};
    if (n_threads > 64)
        n_threads = 64;
    if (n_threads > r1 - r0)
        n_threads = (int)(r1 - r0);
    const size_t row_bytes = woolly_row_bytes(t->type, (int64_t)t->ne[0]);
    for (int i = 0; i < n_threads; i++) {
        const int64_t a = r0 + (r1 - r0) * i / n_threads, b = r0 + (r1 - r0) * (i + 1) / n_threads;
        jobs[i] = (chunk_job){.t = t, .r0 = a, .r1 = b, .out = out + (size_t)(a - r0) * row_bytes};
        /* the calling thread takes the last share; a thread that cannot start runs here too */
        if (i < n_threads - 1)
            started[i] = pthread_create(&tid[i], NULL, convert_rows, &jobs[i]) == 0;
    }
    for (int i = 0; i < n_threads; i++)
        if (!started[i])
            convert_rows(&jobs[i]);
    int status = 0;
    for (int i = 0; i < n_threads; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        if (jobs[i].status != 0 && status == 0) {
            *err = jobs[i].err;
            status = -1;
        }
    }
    return status;
}

static int write_converted(gguf_writer *w, const woolly_stream_tensor *t, int n_threads, uint8_t *chunk,
                           woolly_error *err)
{
    const size_t row_bytes = woolly_row_bytes(t->type, (int64_t)t->ne[0]);
    const int64_t rows = (int64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    int64_t per_chunk = (int64_t)(CHUNK_BYTES / row_bytes);
    if (per_chunk < 1)
        per_chunk = 1;
    for (int64_t r = 0; r < rows; r += per_chunk) {
        const int64_t r1 = r + per_chunk < rows ? r + per_chunk : rows;
        if (convert_chunk(t, r, r1, chunk, n_threads, err) != 0)
            return -1;
        if (gguf_writer_write_data(w, chunk, (size_t)(r1 - r) * row_bytes, err) != 0)
            return -1;
    }
    return 0;
}

int woolly_stream_write(gguf_writer *w, const woolly_stream_tensor *t, size_t n, int n_threads,
                        woolly_stream_progress_fn progress, void *progress_ctx, woolly_error *err)
{
    size_t max_row = 0;
    for (size_t i = 0; i < n; i++) {
        const size_t rb = woolly_row_bytes(t[i].type, (int64_t)t[i].ne[0]);
        max_row = rb > max_row ? rb : max_row;
    }
    const size_t chunk_size = max_row > CHUNK_BYTES ? max_row : CHUNK_BYTES;
    uint8_t *chunk = malloc(chunk_size);
    if (!chunk)
        return woolly_fail(err, "out of memory for a %zu-byte conversion buffer", chunk_size);
    int status = 0;
    for (size_t i = 0; i < n && status == 0; i++) {
        if (progress)
            progress(progress_ctx, i, n, &t[i]);
        if (t[i].rows)
            status = write_converted(w, &t[i], n_threads < 1 ? 1 : n_threads, chunk, err);
        else
            status = gguf_writer_write_data(w, t[i].raw, (size_t)woolly_stream_tensor_bytes(&t[i]), err);
    }
    free(chunk);
    return status;
}
