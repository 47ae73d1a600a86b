/* The weights' activation formats and layouts, chosen once per model, and the repack that makes them.
 *
 * A matrix whose kernels want an interleaved layout is repacked at load into one anonymous mapping
 * (2 MiB aligned, so that it gets huge pages), by all cores, one matrix at a time; after each matrix
 * the pages of its mapped original are dropped, so the weight is resident once and the peak stays at
 * about the file's size. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu.h"
#include "model.h"

/* The layout and default activation format of one matrix: the profile's layout for its shape, else
 * the defaults (under a strict profile, among F16/F32 activations). */
static int pick(const woolly_profile *p, woolly_matrix *w, woolly_error *err)
{
    const woolly_profile_layout *tuned = woolly_profile_find_layout(p, w->type, w->rows, w->cols);
    woolly_error why;
    int rc;
    if (tuned) {
        w->layout = tuned->layout;
        rc = woolly_matmul_layout_format(w->type, w->cols, w->layout, woolly_profile_act_mask(p), &w->act,
                                         &why);
    } else {
        rc = woolly_matmul_default_format(w->type, w->cols, woolly_profile_act_mask(p), &w->act, &w->layout,
                                          &why);
    }
    if (rc)
        return woolly_fail(err, "tensor '%s': %s", w->name, why.msg);
    w->row_bytes = woolly_layout_row_bytes(w->layout, w->type, w->cols);
    return 0;
}

int woolly_model_pick_layouts(woolly_model *m, woolly_error *err)
{
    const int32_t n_layer = m->cfg.n_layer;
    m->mats = calloc((size_t)n_layer * 7 + 1, sizeof *m->mats);
    if (!m->mats)
        return woolly_fail(err, "%s: out of memory", m->label);
    for (int32_t l = 0; l < n_layer; l++) {
        woolly_layer *L = &m->w.layers[l];
        woolly_matrix *ms[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
            m->mats[m->n_mats++] = ms[i];
    }
    m->mats[m->n_mats++] = &m->w.output;
    for (int32_t i = 0; i < m->n_mats; i++) {
        m->mats[i]->id = i;
        if (pick(m->profile, m->mats[i], err))
            return -1;
    }
    return 0;
}

/* Bytes a matrix takes in its layout: whole groups of rows. */
static size_t layout_bytes(const woolly_matrix *w)
{
    const int64_t g = w->layout->rows, rows = (w->rows + g - 1) / g * g;
    return w->row_bytes * (size_t)rows;
}

typedef struct repack_job {
    const woolly_matrix *w;
    const void *src;
    void *dst;
} repack_job;

static void repack_job_run(void *arg, int ith, int nth)
{
    const repack_job *j = arg;
    const int g = j->w->layout->rows;
    long long r0, r1;
    woolly_split_range(j->w->rows, g, ith, nth, &r0, &r1);
    if (r0 >= r1)
        return;
    j->w->layout->repack(&(woolly_repack_args){.src = j->src,
                                               .src_row_bytes = woolly_row_bytes(j->w->type, j->w->cols),
                                               .dst = j->dst,
                                               .dst_row_bytes = j->w->row_bytes,
                                               .k = j->w->cols,
                                               .r0 = r0,
                                               .r1 = r1});
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

enum { HUGE_PAGE = 2 << 20, ALIGN = 64 };

int woolly_model_repack(woolly_model *m, woolly_error *err)
{
    size_t total = 0;
    for (int32_t i = 0; i < m->n_mats; i++)
        if (m->mats[i]->layout)
            total += (layout_bytes(m->mats[i]) + ALIGN - 1) / ALIGN * ALIGN;
    if (!total)
        return 0;
    m->repacked_bytes = total + HUGE_PAGE;
    void *map = mmap(NULL, m->repacked_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        m->repacked_bytes = 0;
        return woolly_fail(err, "%s: cannot map %zu bytes for the repacked weights", m->label, total);
    }
    m->repacked = map;
    char *dst = (char *)(((uintptr_t)map + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
    madvise(dst, total, MADV_HUGEPAGE);

    const int n_threads = woolly_cpu_get()->n_cores > 0 ? woolly_cpu_get()->n_cores : 1;
    woolly_threadpool *pool = woolly_threadpool_open(n_threads, err);
    if (!pool)
        return -1;
    const void *embd = m->w.token_embd.data;
    for (int32_t i = 0; i < m->n_mats; i++) {
        woolly_matrix *w = m->mats[i];
        if (!w->layout)
            continue;
        repack_job j = {w, w->data, dst};
        woolly_threadpool_run(pool, repack_job_run, &j);
        drop_pages(w->data, woolly_row_bytes(w->type, w->cols) * (size_t)w->rows);
        if (w->data == embd) /* tied embeddings: the lookup reads the repacked matrix too */
            m->w.token_embd = *w;
        w->data = dst;
        if (m->w.token_embd.data == j.src)
            m->w.token_embd.data = dst;
        dst += (layout_bytes(w) + ALIGN - 1) / ALIGN * ALIGN;
    }
    woolly_threadpool_close(pool);
    return 0;
}

void woolly_model_release_repacked(woolly_model *m)
{
    if (m->repacked)
        munmap(m->repacked, m->repacked_bytes);
    m->repacked = NULL;
}
