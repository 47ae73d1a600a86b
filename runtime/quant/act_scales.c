/* Activation-aware scales: groups of a norm and the matrices that read its output, the search of each
 * group's alpha, and the row functions that write the scaled tensors (act_scales.h). */
#include "act_scales.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"

enum {
    MAX_MATS = 3,      /* attn_q, attn_k, attn_v */
    SAMPLE_ROWS = 512, /* rows of each matrix the search rounds, evenly spaced: all of a small model's */
    ALPHAS = 11,       /* 0, 0.1, ..., 1 */
};

/* A group keeps s = 1 unless its best alpha lowers the error by this share: on stories260K, groups
 * scaled for less (0.1-1%, within what the sample of rows decides) made the KL divergence of some
 * types worse (bench/RESULTS.md, "Activation-aware scales"). */
#define MIN_GAIN 0.01

/* The architectures whose norms multiply by their weight as stored and feed these matrices alone. */
static const char *const ARCHS[] = {"llama", "granite", "qwen2", "qwen3", "gemma3", "phi3"};

/* What a scaled tensor's row function reads: the source tensor and the scales to multiply (a matrix's
 * columns) or divide (a norm) it by. */
typedef struct {
    const gguf_tensor *src;
    const float *s;
    bool divide;
} scaled_source;

typedef struct {
    size_t norm;          /* tensor index of the norm */
    size_t mat[MAX_MATS]; /* tensor indices of the matrices */
    int n_mat;
    const float *imp[MAX_MATS]; /* each matrix's importance, from the file */
    int64_t cols;
    /* the search's result */
    double alpha, err_plain, err_best;
    float *s;                    /* cols scales (NULL: the group keeps s = 1) */
    float *imp_scaled[MAX_MATS]; /* imp / s^2, the scaled matrices' importance */
    scaled_source src[MAX_MATS + 1];
} group;

struct woolly_act_scales {
    group *groups;
    int n;
};

static int scaled_row(void *ctx, int64_t row, float *dst, woolly_error *err)
{
    const scaled_source *q = ctx;
    if (woolly_stream_gguf_row((void *)q->src, row, dst, err) != 0)
        return -1;
    for (uint64_t c = 0; c < q->src->ne[0]; c++)
        dst[c] = q->divide ? dst[c] / q->s[c] : dst[c] * q->s[c];
    return 0;
}

/* ---- finding the groups ------------------------------------------------------------------------- */

static long tensor_index(const gguf_file *g, const char *name)
{
    const gguf_tensor *t = gguf_find_tensor(g, name);
    return t ? (long)(t - g->tensors) : -1;
}

static bool arch_is_dense_decoder(const gguf_file *g)
{
    woolly_error ignored = {{0}};
    gguf_str arch;
    if (!gguf_get_str(g, "general.architecture", &arch, &ignored))
        return false;
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (arch.len == strlen(ARCHS[i]) && memcmp(arch.ptr, ARCHS[i], arch.len) == 0)
            return true;
    return false;
}

/* A matrix the group can scale: 2-D with the norm's width, converted from its source (not copied) to a
 * block format, with importance data. */
static bool scalable(const gguf_file *g, const woolly_stream_tensor *plan, long i, uint64_t cols)
{
    if (i < 0)
        return false;
    const gguf_tensor *t = &g->tensors[i];
    return t->n_dims == 2 && t->ne[0] == cols && plan[i].rows && woolly_can_dequantize(t->type) &&
           woolly_type_get(plan[i].type)->block_elems > 1;
}

/* The group of layer `layer`'s norm `norm` and the matrices `mats` (all present, or the first missing
 * and the rest present: phi3's fused ffn_up without ffn_gate). Returns 1 if it is one, 0 if not, -1 on
 * an importance matrix of the wrong shape. */
static int make_group(const gguf_file *g, const woolly_imatrix_file *im, const woolly_stream_tensor *plan,
                      int layer, const char *norm, const char *const *mats, int n_mats, group *out,
                      woolly_error *err)
{
    char name[128];
    snprintf(name, sizeof name, "blk.%d.%s.weight", layer, norm);
    const long ni = tensor_index(g, name);
    if (ni < 0 || g->tensors[ni].n_dims != 1 || !woolly_can_dequantize(g->tensors[ni].type))
        return 0;
    const uint64_t cols = g->tensors[ni].ne[0];
    memset(out, 0, sizeof *out);
    out->norm = (size_t)ni;
    out->cols = (int64_t)cols;
    for (int m = 0; m < n_mats; m++) {
        snprintf(name, sizeof name, "blk.%d.%s.weight", layer, mats[m]);
        const long mi = tensor_index(g, name);
        if (mi < 0 && m == 0 && n_mats > 1)
            continue;
        if (!scalable(g, plan, mi, cols))
            return 0;
        const float *imp = NULL;
        if (woolly_imatrix_file_find(im, name, cols, 1, &imp, err) != 0)
            return -1;
        if (!imp)
            return 0;
        out->mat[out->n_mat] = (size_t)mi;
        out->imp[out->n_mat++] = imp;
    }
    return out->n_mat > 0;
}

/* Every group of the file, in layer order; *n_out groups. */
static group *find_groups(const gguf_file *g, const woolly_imatrix_file *im, const woolly_stream_tensor *plan,
                          int *n_out, woolly_error *err)
{
    static const char *const qkv[] = {"attn_q", "attn_k", "attn_v"}, *const fused_qkv[] = {"attn_qkv"};
    static const char *const gate_up[] = {"ffn_gate", "ffn_up"};
    int n_layer = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        int layer;
        if (sscanf(g->tensors[i].name, "blk.%d.", &layer) == 1 && layer >= n_layer)
            n_layer = layer + 1;
    }
    group *gs = calloc((size_t)(2 * n_layer + 1), sizeof *gs);
    if (!gs) {
        woolly_fail(err, "out of memory for %d layers' scales", n_layer);
        return NULL;
    }
    int n = 0;
    for (int l = 0; l < n_layer; l++) {
        int st = make_group(g, im, plan, l, "attn_norm", qkv, 3, &gs[n], err);
        if (st == 0)
            st = make_group(g, im, plan, l, "attn_norm", fused_qkv, 1, &gs[n], err);
        if (st < 0)
            goto fail;
        n += st;
        /* a router reads ffn_norm's output too: a mixture's layers keep theirs */
        char router[64];
        snprintf(router, sizeof router, "blk.%d.ffn_gate_inp.weight", l);
        if (gguf_find_tensor(g, router))
            continue;
        st = make_group(g, im, plan, l, "ffn_norm", gate_up, 2, &gs[n], err);
        if (st < 0)
            goto fail;
        n += st;
    }
    *n_out = n;
    return gs;
fail:
    free(gs);
    return NULL;
}

/* ---- the search --------------------------------------------------------------------------------- */

/* s[c] = imp[c]^(alpha / 2), the importance floored at 1e-3 of its mean (a column no token reached
 * would get an unbounded scale), normalized so that sqrt(max * min) = 1. */
static void make_scales(const float *imp, int64_t cols, double alpha, float *s)
{
    double mean = 0;
    for (int64_t c = 0; c < cols; c++)
        mean += imp[c];
    mean = mean / (double)cols;
    const double floor_imp = mean > 0 ? 1e-3 * mean : 1;
    double lo = INFINITY, hi = 0;
    for (int64_t c = 0; c < cols; c++) {
        const double v = pow(fmax(imp[c], floor_imp), alpha / 2);
        s[c] = (float)v;
        lo = fmin(lo, v), hi = fmax(hi, v);
    }
    const double mid = sqrt(lo * hi);
    for (int64_t c = 0; c < cols; c++)
        s[c] = (float)(s[c] / mid);
}

typedef struct {
    float *row, *scaled, *back, *qw;
    uint8_t *q;
} scratch;

/* The group's output error with scales s: over the sampled rows of its matrices, the sum of imp[c] *
 * (w - dequantized(w * s) / s)^2. */
static double group_error(const gguf_file *g, const woolly_stream_tensor *plan, const group *gr,
                          const float *s, scratch *b)
{
    const int64_t cols = gr->cols;
    double total = 0;
    for (int m = 0; m < gr->n_mat; m++) {
        const gguf_tensor *t = &g->tensors[gr->mat[m]];
        const enum woolly_type type = plan[gr->mat[m]].type;
        const int64_t rows = (int64_t)t->ne[1], n = rows < SAMPLE_ROWS ? rows : SAMPLE_ROWS;
        woolly_error ignored = {{0}};
        for (int64_t c = 0; c < cols; c++)
            b->qw[c] = gr->imp[m][c] / (s[c] * s[c]);
        for (int64_t k = 0; k < n; k++) {
            const int64_t r = k * rows / n;
            if (woolly_stream_gguf_row((void *)t, r, b->row, &ignored) != 0)
                return INFINITY;
            for (int64_t c = 0; c < cols; c++)
                b->scaled[c] = b->row[c] * s[c];
            if (woolly_quantize_row_weighted(type, b->scaled, b->q, cols, b->qw) == 0 ||
                woolly_dequantize_row(type, b->q, b->back, cols) != 0)
                return INFINITY;
            for (int64_t c = 0; c < cols; c++) {
                const double e = (double)b->row[c] - (double)b->back[c] / s[c];
                total += gr->imp[m][c] * e * e;
            }
        }
    }
    return total;
}

/* The group's alpha: the forced one, or the grid's point of least error (0 when it gains less than
 * MIN_GAIN). */
static int search_group(const gguf_file *g, const woolly_stream_tensor *plan, group *gr, double forced,
                        scratch *b)
{
    const int64_t cols = gr->cols;
    float *s = malloc(sizeof(float) * (size_t)cols), *best = malloc(sizeof(float) * (size_t)cols);
    if (!s || !best) {
        free(s), free(best);
        return -1;
    }
    for (int64_t c = 0; c < cols; c++)
        s[c] = 1;
    gr->err_plain = group_error(g, plan, gr, s, b);
    gr->err_best = gr->err_plain;
    gr->alpha = 0;
    for (int a = 1; a < ALPHAS; a++) {
        const double alpha = forced >= 0 ? forced : (double)a / (ALPHAS - 1);
        make_scales(gr->imp[0], cols, alpha, s);
        const double e = group_error(g, plan, gr, s, b);
        if (forced >= 0 || e < gr->err_best) {
            gr->err_best = e, gr->alpha = alpha;
            memcpy(best, s, sizeof(float) * (size_t)cols);
        }
        if (forced >= 0)
            break;
    }
    free(s);
    if (forced < 0 && gr->err_best > (1 - MIN_GAIN) * gr->err_plain)
        gr->alpha = 0, gr->err_best = gr->err_plain;
    if (gr->alpha == 0 && forced < 0) {
        free(best);
        return 0;
    }
    gr->s = best;
    return 0;
}

typedef struct {
    const gguf_file *g;
    const woolly_stream_tensor *plan;
    group *gs;
    int n;
    double forced;
    atomic_int next;
    atomic_int failed;
} search_job;

static void *search_worker(void *arg)
{
    search_job *j = arg;
    int64_t cols = 0;
    for (int i = 0; i < j->n; i++)
        cols = j->gs[i].cols > cols ? j->gs[i].cols : cols;
    scratch b = {malloc(sizeof(float) * (size_t)cols), malloc(sizeof(float) * (size_t)cols),
                 malloc(sizeof(float) * (size_t)cols), malloc(sizeof(float) * (size_t)cols),
                 malloc(2 * sizeof(float) * (size_t)cols)}; /* any format's row fits in 2 x 4 bytes a value */
    if (!b.row || !b.scaled || !b.back || !b.qw || !b.q) {
        atomic_store(&j->failed, 1);
    } else {
        for (int i; (i = atomic_fetch_add(&j->next, 1)) < j->n && !atomic_load(&j->failed);)
            if (search_group(j->g, j->plan, &j->gs[i], j->forced, &b) != 0)
                atomic_store(&j->failed, 1);
    }
    free(b.row), free(b.scaled), free(b.back), free(b.qw), free(b.q);
    return NULL;
}

/* ---- applying them ------------------------------------------------------------------------------ */

static void add_note(char (*note)[160], const char *text)
{
    const size_t len = strlen(*note);
    snprintf(*note + len, sizeof *note - len, "%s%s", len ? "; " : "", text);
}

static int apply_group(const gguf_file *g, group *gr, woolly_stream_tensor *plan, char (*notes)[160])
{
    char text[96];
    snprintf(text, sizeof text, "activation scales, alpha %.1f (output error x%.3f)", gr->alpha,
             gr->err_plain > 0 ? gr->err_best / gr->err_plain : 1.0);
    for (int m = 0; m < gr->n_mat; m++) {
        float *imp = malloc(sizeof(float) * (size_t)gr->cols);
        if (!imp)
            return -1;
        for (int64_t c = 0; c < gr->cols; c++)
            imp[c] = gr->imp[m][c] / (gr->s[c] * gr->s[c]);
        gr->imp_scaled[m] = imp;
        gr->src[m] = (scaled_source){&g->tensors[gr->mat[m]], gr->s, false};
        woolly_stream_tensor *t = &plan[gr->mat[m]];
        t->rows = scaled_row, t->ctx = &gr->src[m], t->raw = NULL, t->importance = imp;
        add_note(&notes[gr->mat[m]], text);
    }
    gr->src[gr->n_mat] = (scaled_source){&g->tensors[gr->norm], gr->s, true};
    woolly_stream_tensor *t = &plan[gr->norm];
    t->rows = scaled_row, t->ctx = &gr->src[gr->n_mat], t->raw = NULL;
    add_note(&notes[gr->norm], text);
    return 0;
}

woolly_act_scales *woolly_act_scales_apply(const gguf_file *g, const woolly_imatrix_file *im,
                                           woolly_stream_tensor *plan, char (*notes)[160], int n_threads,
                                           double alpha, woolly_act_scales_summary *summary,
                                           woolly_error *err)
{
    *summary = (woolly_act_scales_summary){.gain = 1};
    woolly_act_scales *as = calloc(1, sizeof *as);
    if (!as) {
        woolly_fail(err, "out of memory for the activation scales");
        return NULL;
    }
    if (!arch_is_dense_decoder(g)) {
        summary->why_none = "the architecture is none of llama, granite, qwen2, qwen3, gemma3, phi3";
        return as;
    }
    if (!(as->groups = find_groups(g, im, plan, &as->n, err))) {
        free(as);
        return NULL;
    }
    summary->groups = as->n;
    if (as->n == 0) {
        summary->why_none = "no norm feeds matrices converted to a block format with importance data";
        return as;
    }
    search_job job = {.g = g, .plan = plan, .gs = as->groups, .n = as->n, .forced = alpha};
    pthread_t tid[64];
    const int nt = n_threads < 1 ? 1 : n_threads > 64 ? 64 : n_threads;
    int started = 0;
    for (; started < nt - 1; started++)
        if (pthread_create(&tid[started], NULL, search_worker, &job) != 0)
            break;
    search_worker(&job);
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    double plain = 0, best = 0;
    for (int i = 0; i < as->n && !job.failed; i++) {
        group *gr = &as->groups[i];
        plain += gr->err_plain, best += gr->err_best;
        if (gr->s && apply_group(g, gr, plan, notes) != 0)
            job.failed = 1;
        summary->scaled += gr->s != NULL;
    }
    if (job.failed) {
        woolly_act_scales_free(as);
        woolly_fail(err, "out of memory searching the activation scales");
        return NULL;
    }
    summary->gain = plain > 0 ? best / plain : 1;
    return as;
}

void woolly_act_scales_free(woolly_act_scales *as)
{
    if (!as)
        return;
    for (int i = 0; i < as->n; i++) {
        free(as->groups[i].s);
        for (int m = 0; m < MAX_MATS; m++)
            free(as->groups[i].imp_scaled[m]);
    }
    free(as->groups);
    free(as);
}
