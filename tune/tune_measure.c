#include "tune_measure.h"

#include <stdlib.h>
#include <string.h>

#include "huge_map.h"
#include "quant.h"
#include "timing.h"

enum { MAX_LAYOUTS = 8, DISTINCT_ROWS = 64, ALIGN = 64 };

/* The weight copies are in 2 MiB pages (huge_map.h): the model's are, and hundreds of MiB of small
 * pages take seconds of page faults on some virtual machines, longer than the measurements. */
typedef struct layout_copies {
    const woolly_layout *layout; /* NULL: GGUF rows */
    woolly_huge_map map;
    char *buf; /* copies, `stride` bytes apart */
    size_t stride;
    int copies;
    woolly_matrix *mats; /* one per copy */
} layout_copies;

struct tune_weights {
    enum woolly_type type;
    int64_t rows, cols;
    double rotate_bytes;
    woolly_huge_map gguf_map;
    void *gguf; /* GGUF rows */
    layout_copies lay[MAX_LAYOUTS];
    int n_lay;
    int max_m;
    float *x, *y;
    void *pack;
};

static void *alloc_aligned(size_t n)
{
    return aligned_alloc(ALIGN, (n + ALIGN - 1) / ALIGN * ALIGN);
}

/* Deterministic values in [-1, 1). */
static float next_value(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)(*s >> 40) / (float)(1 << 23) - 1.0f;
}

tune_weights *tune_weights_open(enum woolly_type type, int64_t rows, int64_t cols, double rotate_bytes,
                                int max_m, woolly_error *err)
{
    tune_weights *w = calloc(1, sizeof *w);
    const size_t rb = woolly_row_bytes(type, cols);
    if (!w || !rb) {
        free(w);
        woolly_fail(err, "%s", rb ? "out of memory" : "rows do not fill whole weight blocks");
        return NULL;
    }
    *w = (tune_weights){
        .type = type, .rows = rows, .cols = cols, .rotate_bytes = rotate_bytes, .max_m = max_m};
    w->gguf = woolly_huge_map_open(&w->gguf_map, rb * (size_t)rows);
    float *row = malloc(sizeof(float) * (size_t)cols);
    w->x = alloc_aligned(sizeof(float) * (size_t)cols * (size_t)max_m);
    w->y = alloc_aligned(sizeof(float) * (size_t)rows * (size_t)max_m);
    size_t widest = 0;
    for (int a = 0; a < WOOLLY_ACT_COUNT; a++) {
        const size_t b = woolly_act_row_bytes((enum woolly_act)a, cols);
        widest = b > widest ? b : widest;
    }
    w->pack = alloc_aligned(widest * (size_t)max_m);
    if (!w->gguf || !row || !w->x || !w->y || !w->pack) {
        free(row);
        tune_weights_close(w);
        woolly_fail(err, "out of memory for a %lldx%lld matrix", (long long)rows, (long long)cols);
        return NULL;
    }
    /* A few distinct quantized rows, repeated: the speed of a kernel does not depend on which values it
     * reads, and quantizing every row of a large matrix would take longer than measuring it. */
    uint64_t s = 0x9E3779B97F4A7C15ull ^ (uint64_t)(rows * 31 + cols);
    for (int64_t r = 0; r < rows; r++) {
        if (r < DISTINCT_ROWS) {
            for (int64_t i = 0; i < cols; i++)
                row[i] = 0.05f * next_value(&s);
            woolly_quantize_row(type, row, (char *)w->gguf + (size_t)r * rb, cols);
        } else {
            memcpy((char *)w->gguf + (size_t)r * rb, (char *)w->gguf + (size_t)(r % DISTINCT_ROWS) * rb, rb);
        }
    }
    free(row);
    for (size_t i = 0; i < (size_t)cols * (size_t)max_m; i++)
        w->x[i] = next_value(&s);
    return w;
}

void tune_weights_close(tune_weights *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->n_lay; i++) {
        woolly_huge_map_close(&w->lay[i].map);
        free(w->lay[i].mats);
    }
    woolly_huge_map_close(&w->gguf_map);
    free(w->x);
    free(w->y);
    free(w->pack);
    free(w);
}

/* The copies of the weights in `layout`, made on first use. */
static layout_copies *copies_of(tune_weights *w, const woolly_layout *layout, woolly_error *err)
{
    for (int i = 0; i < w->n_lay; i++)
        if (w->lay[i].layout == layout)
            return &w->lay[i];
    if (w->n_lay == MAX_LAYOUTS) {
        woolly_fail(err, "more than %d layouts for one shape", MAX_LAYOUTS);
        return NULL;
    }
    const size_t rb = woolly_row_bytes(w->type, w->cols);
    const size_t lrb = woolly_layout_row_bytes(layout, w->type, w->cols);
    const int64_t g = layout ? layout->rows : 1, padded = (w->rows + g - 1) / g * g;
    const size_t bytes = lrb * (size_t)padded, stride = (bytes + ALIGN - 1) / ALIGN * ALIGN;
    double n = w->rotate_bytes / (double)bytes;
    const int copies = n < 1 ? 1 : n > 65536 ? 65536 : (int)(n + 0.999);
    layout_copies *lc = &w->lay[w->n_lay];
    *lc = (layout_copies){.layout = layout, .stride = stride, .copies = copies};
    lc->buf = woolly_huge_map_open(&lc->map, stride * (size_t)copies);
    lc->mats = malloc(sizeof *lc->mats * (size_t)copies);
    if (!lc->buf || !lc->mats) {
        woolly_huge_map_close(&lc->map);
        free(lc->mats);
        woolly_fail(err, "out of memory for %d copies of %zu bytes", copies, bytes);
        return NULL;
    }
    if (layout)
        layout->repack(&(woolly_repack_args){w->gguf, rb, lc->buf, lrb, w->cols, 0, w->rows});
    else
        memcpy(lc->buf, w->gguf, bytes);
    for (int c = 0; c < copies; c++) {
        if (c)
            memcpy(lc->buf + (size_t)c * stride, lc->buf, bytes);
        lc->mats[c] = woolly_matrix_rows(lc->buf + (size_t)c * stride, w->type, w->rows, w->cols, "tune");
        lc->mats[c].layout = layout;
        lc->mats[c].row_bytes = lrb;
    }
    w->n_lay++;
    return lc;
}

typedef struct run {
    woolly_threadpool *pool;
    const layout_copies *lc;
    woolly_matmul_plan plan;
    int next, m;
    tune_weights *w;
} run;

static void run_once(void *p)
{
    run *r = p;
    woolly_matmul(r->pool, &r->plan, &r->lc->mats[r->next], r->w->x, r->m, r->w->y, (size_t)r->w->rows,
                  r->w->pack);
    r->next = (r->next + 1) % r->lc->copies;
}

int tune_measure(tune_weights *w, woolly_threadpool *pool, const woolly_matmul_step *s,
                 enum woolly_tokens_class c, int m, const tune_timing *t, double *sec, bool *pruned,
                 woolly_error *err)
{
    *pruned = false;
    if (m > w->max_m || woolly_tokens_class_of(m) != c)
        return woolly_fail(err, "%d tokens are not in class %s (at most %d)", m, woolly_tokens_class_name(c),
                           w->max_m);
    const woolly_layout *layout = s->kernel ? s->kernel->layout : NULL;
    if (woolly_matmul_step_check(s, w->type, layout, w->cols, c, err))
        return -1;
    const layout_copies *lc = copies_of(w, layout, err);
    if (!lc)
        return -1;
    run r = {.pool = pool, .lc = lc, .m = m, .w = w};
    r.plan.step[c] = *s;
    if (s->kernel->act != WOOLLY_ACT_F32)
        r.plan.pack[c] = woolly_kernel_choose_pack(s->kernel->act)->pack;
    const double t0 = woolly_now_s();
    run_once(&r); /* the first call: warm-up, and a bound on the time of the others */
    const double first = woolly_now_s() - t0;
    if (t->prune_s > 0 && first > t->prune_s) {
        *pruned = true;
        *sec = first;
        return 0;
    }
    if (first >= t->cap_s) { /* one call takes the whole allowance: it is the measurement */
        *sec = first;
        return 0;
    }
    const woolly_timing tm = woolly_time_fn(run_once, &r, t->min_sample_s, t->samples, t->cap_s - first);
    *sec = tm.median_s;
    return 0;
}
