/* The weights' activation formats and layouts, chosen once per model, and the repack that makes them.
 *
 * A matrix whose kernels want an interleaved layout is repacked at load into one anonymous mapping
 * (2 MiB aligned, so that it gets huge pages), by all cores, one matrix at a time. Each thread reads its
 * rows from the file into a small buffer and repacks them from there, so the original is never resident
 * in the process beside its repacked copy and the peak stays at about the file's size. (A model parsed
 * from a buffer is repacked from the buffer.) A model opened from a path first looks in the repack cache
 * (repack_cache.c) for the same region made by an earlier load and maps it if it is there; after a
 * repack it writes the region there. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch.h"
#include "cpu.h"
#include "model.h"
#include "repack_cache.h"

/* The layout and default activation format of one matrix: the profile's layout for its shape, else
 * the defaults (under a strict profile, among F16/F32 activations), with activations in `prefer` where
 * the matrix takes them (-1: none). */
static int pick(const woolly_profile *p, woolly_matrix *w, int prefer, woolly_error *err)
{
    const woolly_profile_layout *tuned = woolly_profile_find_layout(p, w->type, w->rows, w->cols);
    woolly_error why;
    int rc;
    if (tuned) {
        w->layout = tuned->layout;
        rc = woolly_matmul_layout_format(w->type, w->cols, w->layout, woolly_profile_act_mask(p), &w->act,
                                         &why);
    } else {
        rc = woolly_matmul_preferred_format(w->type, w->cols, woolly_profile_act_mask(p), prefer, &w->act,
                                            &w->layout, &why);
    }
    if (rc)
        return woolly_fail(err, "tensor '%s': %s", w->name, why.msg);
    w->row_bytes = woolly_layout_row_bytes(w->layout, w->type, w->cols);
    return 0;
}

int woolly_model_pick_layouts(woolly_model *m, woolly_error *err)
{
    const woolly_arch *a = m->cfg.arch;
    const int32_t n_layer = m->cfg.n_layer, n_tensors = woolly_arch_n_tensors(a);
    size_t cap = 0;
    for (int32_t i = 0; i < n_tensors; i++) {
        const woolly_arch_tensor *t = woolly_arch_tensor_at(a, i);
        const size_t copies = t->per_block ? (size_t)n_layer : 1;
        if (t->kind == WOOLLY_TENSOR_MATRIX)
            cap += (size_t)woolly_arch_n_matrices(t) * copies;
        if (t->kind == WOOLLY_TENSOR_EXPERTS)
            cap += (size_t)woolly_dim_value(&t->ne[2], &m->cfg) * copies;
    }
    m->mats = calloc(cap ? cap : 1, sizeof *m->mats);
    if (!m->mats)
        return woolly_fail(err, "%s: out of memory", m->label);
    /* The layers' matrices layer by layer, each in table order (a fused tensor's parts in theirs, an
     * experts tensor's experts in theirs: each expert a matrix with a layout and a plan of its own), then
     * the global ones (the output): the order the contexts' plans and the repack cache's key index them
     * by. */
    for (int32_t k = 0; k <= n_layer; k++)
        for (int32_t i = 0; i < n_tensors; i++) {
            const int32_t layer = k < n_layer ? k : -1; /* the layers', then the global ones */
            const woolly_arch_tensor *t = woolly_arch_tensor_at(a, i);
            if (t->per_block != (layer >= 0))
                continue;
            if (t->kind == WOOLLY_TENSOR_EXPERTS) {
                const woolly_experts *x = woolly_arch_slot(&m->w, t, layer);
                for (int64_t e = 0; x->each && e < woolly_dim_value(&t->ne[2], &m->cfg); e++)
                    m->mats[m->n_mats++] = &x->each[e];
                continue;
            }
            if (t->kind != WOOLLY_TENSOR_MATRIX)
                continue;
            for (int j = 0; j < woolly_arch_n_matrices(t); j++) {
                woolly_matrix *w = woolly_arch_matrix(&m->w, t, layer, j);
                if (w->data)
                    m->mats[m->n_mats++] = w;
            }
        }
    for (int32_t i = 0; i < m->n_mats; i++) {
        m->mats[i]->id = i;
        if (m->mats[i]->type != WOOLLY_TYPE_Q8_0 && pick(m->profile, m->mats[i], -1, err))
            return -1;
    }
    /* Q8_0 matrices take F16 activations by default, for a Q8_0 file's accuracy (codegen/kernels.toml
     * says what int8 ones cost it). In a file whose other matrices already run on int8 activations (a
     * K-quant mix, where Q8_0 holds the rows that are not whole K-quant blocks, e.g. Gemma 3 1B's 1152
     * columns) that accuracy is spent anyway, and the float GEMM would bound the prompt's speed: they
     * take int8 activations too. */
    int prefer = -1;
    for (int32_t i = 0; i < m->n_mats; i++)
        if (m->mats[i]->type != WOOLLY_TYPE_Q8_0 && m->mats[i]->act == WOOLLY_ACT_Q8)
            prefer = WOOLLY_ACT_Q8;
    for (int32_t i = 0; i < m->n_mats; i++)
        if (m->mats[i]->type == WOOLLY_TYPE_Q8_0 && pick(m->profile, m->mats[i], prefer, err))
            return -1;
    return 0;
}

/* Bytes a matrix takes in its layout: whole groups of rows. */
static size_t layout_bytes(const woolly_matrix *w)
{
    const int64_t g = w->layout->rows, rows = (w->rows + g - 1) / g * g;
    return w->row_bytes * (size_t)rows;
}

size_t woolly_repack_scratch_bytes = 4 << 20;

typedef struct repack_job {
    const gguf_file *file;
    const woolly_matrix *w;
    const void *src; /* the matrix in the file's buffer */
    void *dst;
    uint8_t *scratch;      /* per thread: scratch_bytes, for the rows read with gguf_read */
    size_t scratch_bytes;  /* 0: repack straight from the mapping (a file parsed from a buffer) */
    atomic_llong next_row; /* the first row no thread has taken yet */
    atomic_int failed;
    woolly_error err; /* the first failure's */
} repack_job;

/* Rows [r0, r1) (r0 a multiple of the row group), a scratch-full at a time: read from the file, then
 * repacked. The reads copy from the page cache, so the original's pages are never mapped into the process:
 * faulting in 4 KiB pages of a 4.7 GB file costs seconds on a virtual machine, and the pages would count
 * twice in the peak RSS until dropped. */
static void repack_rows(repack_job *j, int ith, long long r0, long long r1)
{
    const woolly_matrix *w = j->w;
    const int g = w->layout->rows;
    const size_t src_row = woolly_row_bytes(w->type, w->cols);
    if (!j->scratch_bytes) {
        w->layout->repack(&(woolly_repack_args){.src = j->src,
                                                .src_row_bytes = src_row,
                                                .dst = j->dst,
                                                .dst_row_bytes = w->row_bytes,
                                                .k = w->cols,
                                                .r0 = r0,
                                                .r1 = r1});
        return;
    }
    uint8_t *buf = j->scratch + (size_t)ith * j->scratch_bytes;
    const long long step = (long long)(j->scratch_bytes / src_row) / g * g;
    for (long long c0 = r0; c0 < r1 && !atomic_load(&j->failed); c0 += step) {
        const long long n = r1 - c0 < step ? r1 - c0 : step;
        woolly_error err;
        if (gguf_read(j->file, (const uint8_t *)j->src + (size_t)c0 * src_row, (size_t)n * src_row, buf,
                      &err)) {
            if (!atomic_exchange(&j->failed, 1))
                j->err = err;
            return;
        }
        /* The chunk starts a row group (c0 is a multiple of g), so its groups land at their places. */
        w->layout->repack(&(woolly_repack_args){.src = buf,
                                                .src_row_bytes = src_row,
                                                .dst = (uint8_t *)j->dst + (size_t)c0 * w->row_bytes,
                                                .dst_row_bytes = w->row_bytes,
                                                .k = w->cols,
                                                .r0 = 0,
                                                .r1 = n});
    }
}

/* Rows per piece of a matrix a thread takes at a time. The threads take the pieces in turn, each the
 * next one free, rather than a fixed share each: one thread's faults and copies (the kernel zeroes each
 * huge page at its first touch, the reads copy from the page cache) can take longer than the other's.
 * granite-8b on a shared 2-core VM, one load each: the time between the first and the last thread
 * finishing fell from 12.5% of the repack to 7.2% with a warm page cache, from 18.7% to 11.1% with a
 * partly cold one; the load time moved within its noise (1.7-1.8 s warm). */
enum { PIECES_PER_THREAD = 8 };

static void repack_job_run(void *arg, int ith, int nth)
{
    repack_job *j = arg;
    const long long rows = j->w->rows, g = j->w->layout->rows;
    long long piece = rows / ((long long)nth * PIECES_PER_THREAD) / g * g;
    piece = piece > g ? piece : g;
    for (long long r0; (r0 = atomic_fetch_add(&j->next_row, piece)) < rows && !atomic_load(&j->failed);)
        repack_rows(j, ith, r0, r0 + piece < rows ? r0 + piece : rows);
}

/* Drops the resident pages of [p, p + n) of the read-only file mapping (those wholly inside it: the
 * edges may hold a neighbour's bytes). The mapping stays valid: nothing reads it again. */
static void drop_pages(const void *p, size_t n)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)p + page - 1) / page * page, b = ((uintptr_t)p + n) / page * page;
    if (b > a)
        madvise((void *)a, b - a, MADV_DONTNEED);
}

enum { ALIGN = 64 };

/* Each repacked matrix's place in the region (indexed as m->mats; ALIGN apart at least); the region's
 * size, 0 when no matrix is repacked. */
static size_t plan_region(const woolly_model *m, size_t *offsets)
{
    size_t total = 0;
    for (int32_t i = 0; i < m->n_mats; i++) {
        offsets[i] = total;
        if (m->mats[i]->layout)
            total += (layout_bytes(m->mats[i]) + ALIGN - 1) / ALIGN * ALIGN;
    }
    return total;
}

/* Points the repacked matrices at their places in the region. A tied token embedding follows its
 * matrix: the lookup reads the repacked rows too. */
static void point_at(woolly_model *m, const char *base, const size_t *offsets)
{
    for (int32_t i = 0; i < m->n_mats; i++) {
        woolly_matrix *w = m->mats[i];
        if (!w->layout)
            continue;
        if (w->data == m->w.token_embd.data)
            m->w.token_embd = *w, m->w.token_embd.data = base + offsets[i];
        w->data = base + offsets[i];
    }
}

/* Repacks every matrix with a layout into the region at `dst`, by all cores. */
static int repack_all(woolly_model *m, char *dst, const size_t *offsets, woolly_error *err)
{
    const int n_threads = woolly_cpu_get()->n_cores > 0 ? woolly_cpu_get()->n_cores : 1;
    woolly_threadpool *pool = woolly_threadpool_open(n_threads, err);
    if (!pool)
        return -1;
    /* Scratch for each thread's reads: enough for one row group of the widest matrix. */
    size_t scratch_bytes = 0;
    uint8_t *scratch = NULL;
    if (m->file->fd >= 0) {
        scratch_bytes = woolly_repack_scratch_bytes;
        for (int32_t i = 0; i < m->n_mats; i++)
            if (m->mats[i]->layout) {
                const size_t group =
                    woolly_row_bytes(m->mats[i]->type, m->mats[i]->cols) * (size_t)m->mats[i]->layout->rows;
                scratch_bytes = group > scratch_bytes ? group : scratch_bytes;
            }
        /* aligned_alloc wants a multiple of the alignment, and each thread's slice starts aligned: an
         * 8-row group of a GGUF row is not always a multiple of 64 bytes (AVX2 layouts). */
        scratch_bytes = (scratch_bytes + ALIGN - 1) / ALIGN * ALIGN;
        scratch = aligned_alloc(ALIGN, scratch_bytes * (size_t)n_threads);
        if (!scratch) {
            woolly_threadpool_close(pool);
            return woolly_fail(err, "%s: out of memory for the repack's buffers", m->label);
        }
    }
    int rc = 0;
    for (int32_t i = 0; i < m->n_mats && !rc; i++) {
        woolly_matrix *w = m->mats[i];
        if (!w->layout)
            continue;
        repack_job j = {.file = m->file,
                        .w = w,
                        .src = w->data,
                        .dst = dst + offsets[i],
                        .scratch = scratch,
                        .scratch_bytes = scratch_bytes};
        atomic_init(&j.next_row, 0);
        atomic_init(&j.failed, 0);
        woolly_threadpool_run(pool, repack_job_run, &j);
        if (atomic_load(&j.failed))
            rc = woolly_fail(err, "%s: tensor '%s': %s", m->label, w->name, j.err.msg);
        else if (!scratch_bytes)
            drop_pages(w->data, woolly_row_bytes(w->type, w->cols) * (size_t)w->rows);
    }
    free(scratch);
    woolly_threadpool_close(pool);
    return rc;
}

int woolly_model_repack(woolly_model *m, woolly_error *err)
{
    size_t *offsets = malloc(((size_t)m->n_mats + 1) * sizeof *offsets);
    if (!offsets)
        return woolly_fail(err, "%s: out of memory", m->label);
    const size_t total = plan_region(m, offsets);
    int rc = 0;
    woolly_repack_cache cache;
    const bool cached = total && woolly_repack_cache_open(m, offsets, total, &cache);
    if (cached)
        snprintf(m->repack_cache, sizeof m->repack_cache, "%s", cache.path);
    const char *mapped = cached ? woolly_repack_cache_map(&cache, &m->repacked) : NULL;
    if (mapped) {
        m->weights = WOOLLY_WEIGHTS_MAPPED;
        point_at(m, mapped, offsets);
    } else if (total) {
        char *dst = woolly_huge_map_open(&m->repacked, total);
        if (!dst)
            rc = woolly_fail(err, "%s: cannot map %zu bytes for the repacked weights", m->label, total);
        else
            rc = repack_all(m, dst, offsets, err);
        if (!rc) {
            m->weights = cached && !woolly_repack_cache_store(&cache, dst) ? WOOLLY_WEIGHTS_REPACKED_SAVED
                                                                           : WOOLLY_WEIGHTS_REPACKED;
            point_at(m, dst, offsets);
        }
    }
    if (cached)
        woolly_repack_cache_close(&cache);
    free(offsets);
    static const char *const how[] = {"as in the file", "repacked at load", "repacked at load, saved to ",
                                      "mapped from "};
    snprintf(m->weights_text, sizeof m->weights_text, "%s%s", how[m->weights],
             m->weights >= WOOLLY_WEIGHTS_REPACKED_SAVED ? m->repack_cache : "");
    return rc;
}

void woolly_model_release_repacked(woolly_model *m)
{
    woolly_huge_map_close(&m->repacked);
}
