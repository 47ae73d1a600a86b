/* See imatrix.h. The file format is llama.cpp's GGUF imatrix: for each matrix "<tensor>.in_sum2", F32
 * [cols, n_mat] (the sums of squares, expert by expert), and "<tensor>.counts", F32 [1, n_mat] (the rows
 * each expert saw); general.type "imatrix", imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size. */
#include "imatrix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "gguf_write.h"

/* One tensor of the file: a matrix, or a mixture of experts' n_mat expert matrices. */
typedef struct im_entry {
    const char *name; /* the model's (outlives the statistics: they belong to one model) */
    int64_t cols;
    int32_t n_mat;
    double *sum2;    /* [n_mat][cols] */
    int64_t *counts; /* [n_mat] */
    /* the rows added last, to skip another view's repeat of them in the same pass */
    const float *last_x;
    int32_t last_n;
    uint64_t last_pass;
} im_entry;

struct woolly_imatrix {
    const woolly_model *model;
    im_entry *entries;
    int32_t n_entries;
    int32_t *entry_of;  /* [model->n_mats] the entry of matrix id, -1: left out */
    int32_t *expert_of; /* [model->n_mats] its expert, 0 for a plain matrix */
    uint64_t pass;
};

static void api_fail(const char *msg, const char *arg)
{
    woolly_error e;
    woolly_fail(&e, "imatrix: %s%s", msg, arg ? arg : "");
    woolly_set_last_error(&e);
}

static int32_t find_entry(const woolly_imatrix *im, const char *name)
{
    for (int32_t i = 0; i < im->n_entries; i++)
        if (!strcmp(im->entries[i].name, name))
            return i;
    return -1;
}

/* The entry named `name` (made if new) for matrix id, as expert e of n_mat. */
static int bind(woolly_imatrix *im, int32_t id, const char *name, int64_t cols, int32_t e, int32_t n_mat)
{
    int32_t k = find_entry(im, name);
    if (k < 0) {
        k = im->n_entries++;
        im_entry *en = &im->entries[k];
        *en = (im_entry){.name = name, .cols = cols, .n_mat = n_mat};
        en->sum2 = calloc((size_t)n_mat * (size_t)cols, sizeof *en->sum2);
        en->counts = calloc((size_t)n_mat, sizeof *en->counts);
        if (!en->sum2 || !en->counts)
            return -1;
    }
    im->entry_of[id] = k;
    im->expert_of[id] = e;
    return 0;
}

woolly_imatrix *woolly_imatrix_open(const woolly_model *m)
{
    if (!m) {
        api_fail("no model", NULL);
        return NULL;
    }
    woolly_imatrix *im = calloc(1, sizeof *im);
    if (!im || !(im->entries = calloc((size_t)m->n_mats + 1, sizeof *im->entries)) ||
        !(im->entry_of = malloc(sizeof *im->entry_of * ((size_t)m->n_mats + 1))) ||
        !(im->expert_of = calloc((size_t)m->n_mats + 1, sizeof *im->expert_of))) {
        woolly_imatrix_close(im);
        api_fail("out of memory", NULL);
        return NULL;
    }
    im->model = m;
    for (int32_t id = 0; id < m->n_mats; id++)
        im->entry_of[id] = -1;
    int rc = 0;
    /* the experts first: their matrices are one tensor's, named after it */
    for (int32_t l = 0; l < m->cfg.n_layer && m->cfg.n_expert > 0; l++) {
        const woolly_experts *xs[] = {&m->w.layers[l].gate_exps, &m->w.layers[l].up_exps,
                                      &m->w.layers[l].down_exps};
        for (int i = 0; i < 3; i++)
            for (int32_t e = 0; e < m->cfg.n_expert && xs[i]->each; e++)
                rc |= bind(im, xs[i]->each[e].id, xs[i]->all.name, xs[i]->each[e].cols, e, m->cfg.n_expert);
    }
    /* the rest but the output, which llama.cpp's tool leaves out too (its rows are few, its error
     * matters little next to the many tokens it is spread over) */
    for (int32_t id = 0; id < m->n_mats; id++)
        if (im->entry_of[id] < 0 && m->mats[id] != &m->w.output && m->mats[id]->name)
            rc |= bind(im, id, m->mats[id]->name, m->mats[id]->cols, 0, 1);
    if (rc) {
        woolly_imatrix_close(im);
        api_fail("out of memory", NULL);
        return NULL;
    }
    return im;
}

void woolly_imatrix_close(woolly_imatrix *im)
{
    if (!im)
        return;
    for (int32_t i = 0; im->entries && i < im->n_entries; i++) {
        free(im->entries[i].sum2);
        free(im->entries[i].counts);
    }
    free(im->entries);
    free(im->entry_of);
    free(im->expert_of);
    free(im);
}

void woolly_imatrix_next_pass(woolly_imatrix *im)
{
    im->pass++;
}

void woolly_imatrix_add(woolly_imatrix *im, const woolly_matrix *w, const float *x, int32_t n)
{
    if (w->id < 0 || w->id >= im->model->n_mats || im->entry_of[w->id] < 0 || n <= 0)
        return;
    im_entry *en = &im->entries[im->entry_of[w->id]];
    if (en->n_mat == 1 && en->last_pass == im->pass && en->last_x == x && en->last_n == n)
        return;
    en->last_pass = im->pass, en->last_x = x, en->last_n = n;
    const int32_t e = im->expert_of[w->id];
    double *s = en->sum2 + (size_t)e * (size_t)en->cols;
    for (int32_t t = 0; t < n; t++) {
        const float *row = x + (size_t)t * (size_t)w->cols;
        for (int64_t j = 0; j < en->cols; j++)
            s[j] += (double)row[j] * (double)row[j];
    }
    en->counts[e] += n;
}

int woolly_imatrix_save(const woolly_imatrix *im, const char *path, const char *dataset, uint32_t chunk_count,
                        uint32_t chunk_size)
{
    woolly_error err = {{0}};
    if (!im || !path) {
        api_fail("no statistics or no path", NULL);
        return -1;
    }
    gguf_writer *w = gguf_writer_open(path, &err);
    if (!w) {
        woolly_set_last_error(&err);
        return -1;
    }
    gguf_writer_set_str(w, "general.type", "imatrix");
    const char *datasets[] = {dataset ? dataset : ""};
    gguf_writer_set_arr_str(w, "imatrix.datasets", datasets, dataset ? 1 : 0);
    gguf_writer_set_u32(w, "imatrix.chunk_count", chunk_count);
    gguf_writer_set_u32(w, "imatrix.chunk_size", chunk_size);
    char name[320];
    int rc = 0;
    for (int32_t i = 0; i < im->n_entries && !rc; i++) {
        const im_entry *en = &im->entries[i];
        int64_t rows = 0;
        for (int32_t e = 0; e < en->n_mat; e++)
            rows += en->counts[e];
        if (!rows) /* never multiplied (e.g. an expert no token chose in any layer's run) */
            continue;
        snprintf(name, sizeof name, "%s.in_sum2", en->name);
        rc |= gguf_writer_add_tensor(w, name, WOOLLY_TYPE_F32, 2,
                                     (const uint64_t[]){(uint64_t)en->cols, (uint64_t)en->n_mat}) < 0;
        snprintf(name, sizeof name, "%s.counts", en->name);
        rc |= gguf_writer_add_tensor(w, name, WOOLLY_TYPE_F32, 2,
                                     (const uint64_t[]){1, (uint64_t)en->n_mat}) < 0;
    }
    if (rc || gguf_writer_write_header(w, &err)) {
        if (rc)
            woolly_fail(&err, "imatrix: cannot add the tensors to %s", path);
        gguf_writer_close(w, NULL);
        woolly_set_last_error(&err);
        return -1;
    }
    for (int32_t i = 0; i < im->n_entries && !rc; i++) {
        const im_entry *en = &im->entries[i];
        int64_t rows = 0;
        for (int32_t e = 0; e < en->n_mat; e++)
            rows += en->counts[e];
        if (!rows)
            continue;
        const size_t n = (size_t)en->n_mat * (size_t)en->cols;
        float *buf = malloc(sizeof *buf * (n > (size_t)en->n_mat ? n : (size_t)en->n_mat));
        if (!buf) {
            rc = woolly_fail(&err, "imatrix: out of memory");
            break;
        }
        for (size_t j = 0; j < n; j++)
            buf[j] = (float)en->sum2[j];
        rc = gguf_writer_write_data(w, buf, sizeof *buf * n, &err);
        for (int32_t e = 0; e < en->n_mat && !rc; e++)
            buf[e] = (float)en->counts[e];
        if (!rc)
            rc = gguf_writer_write_data(w, buf, sizeof *buf * (size_t)en->n_mat, &err);
        free(buf);
    }
    if (gguf_writer_close(w, rc ? NULL : &err) || rc) {
        woolly_set_last_error(&err);
        return -1;
    }
    return 0;
}

int woolly_context_set_imatrix(woolly_context *c, woolly_imatrix *im)
{
    if (im && im->model != c->model) {
        api_fail("the statistics are of another model than the context's", NULL);
        return -1;
    }
    c->imatrix = im;
    return 0;
}
