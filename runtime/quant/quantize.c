/* `woolly quantize`: a GGUF in, the same GGUF out with its matrices converted by a mix (quant_mix.c),
 * tensor by tensor (quant_stream.c). */
#include "quantize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "act_scales.h"
#include "cpu.h"
#include "gguf.h"
#include "gguf_write.h"
#include "imatrix_read.h"
#include "quant.h"
#include "quant_stream.h"

/* llama.cpp's general.quantization_version for the current block formats. */
#define QUANTIZATION_VERSION 2

/* Layers: <arch>.block_count, or one more than the highest blk.<i> if the key is missing. */
/* The file's "<arch>.expert_count", or 0 when it has none. */
static int count_experts(const gguf_file *g)
{
    woolly_error ignored = {{0}};
    gguf_str arch;
    uint32_t n = 0;
    if (!gguf_get_str(g, "general.architecture", &arch, &ignored))
        return 0;
    char key[160];
    snprintf(key, sizeof key, "%.*s.expert_count", (int)(arch.len < 100 ? arch.len : 100), arch.ptr);
    return gguf_get_u32(g, key, &n, &ignored) && n <= 1u << 20 ? (int)n : 0;
}

/* Query heads per KV head from "<arch>.attention.head_count" and "head_count_kv" (single numbers); 0
 * when either is missing or given per layer. */
static int count_gqa(const gguf_file *g)
{
    woolly_error ignored = {{0}};
    gguf_str arch;
    uint32_t nh = 0, nkv = 0;
    if (!gguf_get_str(g, "general.architecture", &arch, &ignored))
        return 0;
    char key[160];
    const int alen = (int)(arch.len < 100 ? arch.len : 100);
    snprintf(key, sizeof key, "%.*s.attention.head_count", alen, arch.ptr);
    if (!gguf_get_u32(g, key, &nh, &ignored))
        return 0;
    snprintf(key, sizeof key, "%.*s.attention.head_count_kv", alen, arch.ptr);
    if (!gguf_get_u32(g, key, &nkv, &ignored))
        nkv = nh;
    return nkv > 0 && nh >= nkv ? (int)(nh / nkv) : 0;
}

static int count_layers(const gguf_file *g, woolly_error *err)
{
    gguf_str arch;
    uint32_t n = 0;
    if (gguf_get_str(g, "general.architecture", &arch, err)) {
        char key[160];
        snprintf(key, sizeof key, "%.*s.block_count", (int)(arch.len < 100 ? arch.len : 100), arch.ptr);
        if (gguf_get_u32(g, key, &n, err))
            return (int)n;
    }
    if (err->msg[0])
        return -1;
    int max = -1;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        int layer;
        if (sscanf(g->tensors[i].name, "blk.%d.", &layer) == 1 && layer > max)
            max = layer;
    }
    return max + 1;
}

typedef struct {
    const gguf_file *in;
    char (*notes)[160];
    double t0;
} progress_ctx;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void print_progress(void *ctx, size_t i, size_t n, const woolly_stream_tensor *t)
{
    progress_ctx *p = ctx;
    const gguf_tensor *src = &p->in->tensors[i];
    char shape[96];
    int len = snprintf(shape, sizeof shape, "%llu", (unsigned long long)t->ne[0]);
    for (uint32_t d = 1; d < t->n_dims && len < (int)sizeof shape; d++)
        len += snprintf(shape + len, sizeof shape - (size_t)len, " x %llu", (unsigned long long)t->ne[d]);
    fprintf(stderr, "[%4zu/%zu] %-32s %-14s %5s -> %-5s%s%s  (%.1f s)\n", i + 1, n, t->name, shape,
            woolly_type_get(src->type)->name, woolly_type_get(t->type)->name,
            p->notes[i][0] ? "  note: " : "", p->notes[i], now_seconds() - p->t0);
}

static void print_act_scales(const woolly_act_scales_summary *s, double seconds)
{
    if (s->groups == 0)
        fprintf(stderr, "activation scales: none applied (%s)\n", s->why_none);
    else
        fprintf(
            stderr,
            "activation scales: %d of %d norm groups scaled, their output error on the sampled rows x%.3f "
            "(%.1f s)\n",
            s->scaled, s->groups, s->gain, seconds);
}

/* The output tensor for input tensor s. */
static woolly_stream_tensor plan_tensor(const gguf_tensor *s, enum woolly_ftype f, const woolly_mix_model *m,
                                        char *note, size_t note_size)
{
    woolly_stream_tensor t = {.name = s->name, .n_dims = s->n_dims};
    memcpy(t.ne, s->ne, sizeof t.ne);
    t.type = woolly_mix_type(f, s->name, s->n_dims, s->ne, m, note, note_size);
    if (!woolly_can_dequantize(s->type)) {
        snprintf(note, note_size, "type %s cannot be converted here: copied as it is",
                 woolly_type_get(s->type)->name);
        t.type = s->type;
    }
    if (t.type == s->type) {
        t.raw = s->data;
    } else {
        if (woolly_type_get(s->type)->block_elems > 1 && note[0] == '\0')
            snprintf(note, note_size, "already %s: converting again adds to its error",
                     woolly_type_get(s->type)->name);
        t.rows = woolly_stream_gguf_row;
        t.ctx = (void *)s;
    }
    return t;
}

/* Gives each matrix converted to a weighted block format its importance from im; a matrix im lacks is
 * quantized unweighted, as llama-quantize does, and its note says so. */
static int attach_importance(const woolly_imatrix_file *im, woolly_stream_tensor *plan, char (*notes)[160],
                             uint64_t n, size_t *n_weighted, woolly_error *err)
{
    for (uint64_t i = 0; i < n; i++) {
        woolly_stream_tensor *t = &plan[i];
        /* the plain formats and Q8_0 do not use the weights (quant.h) */
        if (!t->rows || t->n_dims < 2 || woolly_type_get(t->type)->block_elems <= 1 ||
            t->type == WOOLLY_TYPE_Q8_0)
            continue;
        const float *qw;
        if (woolly_imatrix_file_find(im, t->name, t->ne[0], t->ne[2] * t->ne[3], &qw, err) != 0)
            return -1;
        t->importance = qw;
        if (qw) {
            (*n_weighted)++;
        } else {
            const size_t len = strlen(notes[i]);
            snprintf(notes[i] + len, sizeof notes[i] - len, "%sno importance data: unweighted",
                     len ? "; " : "");
        }
    }
    return 0;
}

int woolly_quantize_file(const char *in, const char *out, enum woolly_ftype f,
                         const woolly_quantize_params *p, woolly_error *err)
{
    const woolly_quantize_params defaults = {0};
    if (!p)
        p = &defaults;
    if (strcmp(woolly_ftype_name(f), "?") == 0)
        return woolly_fail(err, "unknown file type %d", (int)f);
    const int n_threads = p->n_threads > 0 ? p->n_threads : woolly_cpu_get()->n_cores;
    const double t0 = now_seconds();

    gguf_file *g = gguf_open(in, err);
    if (!g)
        return -1;
    woolly_error kerr = {{0}};
    const int n_layer = count_layers(g, &kerr);
    if (n_layer < 0) {
        gguf_close(g);
        return woolly_fail(err, "%s: %s", in, kerr.msg);
    }
    woolly_imatrix_file *im = NULL;
    if (p->act_scales && !p->imatrix) {
        gguf_close(g);
        return woolly_fail(err,
                           "activation scales (--act-scales) need an importance matrix (--imatrix FILE)");
    }
    if (p->imatrix && !(im = woolly_imatrix_file_read(p->imatrix, err))) {
        gguf_close(g);
        return -1;
    }
    const woolly_mix_model m = {.n_layer = n_layer,
                                .tied_embd = gguf_find_tensor(g, "output.weight") == NULL,
                                .n_expert = count_experts(g),
                                .n_gqa = count_gqa(g),
                                .imatrix = im != NULL};

    woolly_stream_tensor *plan = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *plan);
    char(*notes)[160] = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *notes);
    if (!plan || !notes) {
        free(plan), free(notes), gguf_close(g);
        return woolly_fail(err, "out of memory planning %llu tensors", (unsigned long long)g->n_tensors);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++)
        plan[i] = plan_tensor(&g->tensors[i], f, &m, notes[i], sizeof notes[i]);
    size_t n_weighted = 0;
    if (im && attach_importance(im, plan, notes, g->n_tensors, &n_weighted, err) != 0) {
        free(plan), free(notes), gguf_close(g), woolly_imatrix_file_free(im);
        return -1;
    }
    woolly_act_scales *scales = NULL;
    woolly_act_scales_summary ss = {0};
    if (p->act_scales &&
        !(scales = woolly_act_scales_apply(g, im, plan, notes, n_threads,
                                           p->act_scales_alpha > 0 ? p->act_scales_alpha : -1, &ss, err))) {
        free(plan), free(notes), gguf_close(g), woolly_imatrix_file_free(im);
        return -1;
    }
    if (scales && !p->quiet)
        print_act_scales(&ss, now_seconds() - t0);

    int status = -1;
    gguf_writer *w = gguf_writer_open(out, err);
    if (w) {
        for (uint64_t i = 0; i < g->n_kv; i++)
            gguf_writer_copy_kv(w, &g->kv[i]);
        gguf_writer_set_u32(w, "general.quantization_version", QUANTIZATION_VERSION);
        gguf_writer_set_u32(w, "general.file_type", (uint32_t)f);
        progress_ctx pc = {.in = g, .notes = notes, .t0 = t0};
        status = woolly_stream_declare(w, plan, g->n_tensors, err);
        if (status == 0)
            status = gguf_writer_write_header(w, err);
        if (status == 0)
            status = woolly_stream_write(w, plan, g->n_tensors, n_threads, p->quiet ? NULL : print_progress,
                                         &pc, err);
        woolly_error cerr = {{0}};
        if (gguf_writer_close(w, &cerr) != 0 && status == 0) {
            *err = cerr;
            status = -1;
        }
    }
    if (status == 0 && !p->quiet) {
        uint64_t out_bytes = 0;
        for (uint64_t i = 0; i < g->n_tensors; i++)
            out_bytes += woolly_stream_tensor_bytes(&plan[i]);
        fprintf(stderr, "quantized %s -> %s (%s): tensor data %.2f MiB -> %.2f MiB, %.1f s on %d threads\n",
                in, out, woolly_ftype_name(f), (double)(g->size - g->data_offset) / (1 << 20),
                (double)out_bytes / (1 << 20), now_seconds() - t0, n_threads);
        if (im)
            fprintf(stderr, "importance matrix %s (%zu matrices): %zu matrices weighted by it\n", p->imatrix,
                    woolly_imatrix_file_count(im), n_weighted);
    }
    free(plan), free(notes);
    woolly_act_scales_free(scales);
    gguf_close(g);
    woolly_imatrix_file_free(im);
    return status;
}
