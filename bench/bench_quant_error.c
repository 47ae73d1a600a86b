/* The quantizer's own objective, tensor by tensor: each quantized file's squared rounding error against
 * the unquantized model, weighed by the columns' importance where an importance matrix is given (what
 * `woolly quantize --imatrix` minimizes), relative to the tensor's weighted squared norm. Where a
 * quantized model's KL divergence moves with which errors a file happens to have (a model of one or two
 * layers: bench/RESULTS.md), this says which quantizer rounds closer, deterministically.
 *
 *   bench_quant_error ORIGINAL.gguf QUANT.gguf [QUANT2.gguf ...] [--imatrix FILE]
 *
 * One row per tensor whose type differs from the original's in some file: its relative error in each
 * file (with its type), and with two files their ratio (below 1: the second rounds closer). The last row
 * sums the weighted errors and norms over the tensors every file quantized to the same types; with two
 * files it also gives the range of those tensors' ratios, in how many the second file is closer and in
 * how many the two are the same (a fallback to F16 in both, say). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "imatrix_read.h"
#include "quant.h"

enum { MAX_FILES = 8 };

static void fail(const char *what, const woolly_error *err)
{
    fprintf(stderr, "bench_quant_error: %s: %s\n", what, err->msg);
    exit(1);
}

static int usage(void)
{
    fprintf(stderr,
            "usage: bench_quant_error ORIGINAL.gguf QUANT.gguf [QUANT2.gguf ...] [--imatrix FILE] (at "
            "most %d quantized files)\n",
            MAX_FILES);
    return 2;
}

/* The tensor's rows as floats (the caller frees), or NULL if its type cannot be dequantized. */
static float *rows_of(const gguf_tensor *t)
{
    const int64_t n = (int64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    float *y = malloc(sizeof(float) * (size_t)n);
    if (!y || woolly_dequantize_row(t->type, t->data, y, n) != 0) {
        free(y);
        return NULL;
    }
    return y;
}

int main(int argc, char **argv)
{
    const char *paths[MAX_FILES + 1], *imatrix_path = NULL;
    int nf = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--imatrix") == 0 && i + 1 < argc)
            imatrix_path = argv[++i];
        else if (argv[i][0] == '-' || nf == MAX_FILES + 1)
            return usage();
        else
            paths[nf++] = argv[i];
    }
    if (nf < 2)
        return usage();
    woolly_error err = {0};
    gguf_file *g[MAX_FILES + 1];
    for (int f = 0; f < nf; f++)
        if (!(g[f] = gguf_open(paths[f], &err)))
            fail(paths[f], &err);
    woolly_imatrix_file *im = NULL;
    if (imatrix_path && !(im = woolly_imatrix_file_read(imatrix_path, &err)))
        fail(imatrix_path, &err);

    printf("| tensor |");
    for (int f = 1; f < nf; f++)
        printf(" %s |", paths[f]);
    printf(nf == 3 ? " ratio |\n| --- |" : "\n| --- |");
    for (int f = 1; f < nf + (nf == 3); f++)
        printf(" ---: |");
    printf("\n");

    double tot_err[MAX_FILES + 1] = {0}, tot_norm = 0, lo_ratio = INFINITY, hi_ratio = 0;
    int n_same = 0, n_closer = 0, n_equal = 0;
    for (uint64_t i = 0; i < g[0]->n_tensors; i++) {
        const gguf_tensor *t0 = &g[0]->tensors[i];
        const gguf_tensor *t[MAX_FILES + 1] = {t0};
        bool quantized = false, same_types = true;
        for (int f = 1; f < nf; f++) {
            t[f] = gguf_find_tensor(g[f], t0->name);
            if (!t[f] || memcmp(t[f]->ne, t0->ne, sizeof t0->ne) != 0) {
                fprintf(stderr, "bench_quant_error: %s has no tensor %s of the original's shape\n", paths[f],
                        t0->name);
                return 1;
            }
            quantized |= t[f]->type != t0->type;
            same_types &= t[f]->type == t[1]->type;
        }
        if (!quantized)
            continue;
        float *x = rows_of(t0);
        if (!x) {
            fprintf(stderr, "bench_quant_error: cannot read %s of %s\n", t0->name, paths[0]);
            return 1;
        }
        const uint64_t ne0 = t0->ne[0], n_mat = t0->ne[2] * t0->ne[3];
        const uint64_t rows_per_mat = t0->ne[1];
        const float *qw = NULL;
        if (im && woolly_imatrix_file_find(im, t0->name, ne0, n_mat, &qw, &err) != 0)
            fail(imatrix_path, &err);
        double norm = 0;
        for (uint64_t r = 0; r < rows_per_mat * n_mat; r++)
            for (uint64_t c = 0; c < ne0; c++) {
                const double w = qw ? qw[r / rows_per_mat * ne0 + c] : 1.0, v = x[r * ne0 + c];
                norm += w * v * v;
            }
        double e[MAX_FILES + 1] = {0};
        printf("| %s |", t0->name);
        for (int f = 1; f < nf; f++) {
            float *y = rows_of(t[f]);
            if (!y) {
                fprintf(stderr, "bench_quant_error: cannot dequantize %s of %s\n", t0->name, paths[f]);
                return 1;
            }
            for (uint64_t r = 0; r < rows_per_mat * n_mat; r++)
                for (uint64_t c = 0; c < ne0; c++) {
                    const double w = qw ? qw[r / rows_per_mat * ne0 + c] : 1.0;
                    const double d = (double)y[r * ne0 + c] - x[r * ne0 + c];
                    e[f] += w * d * d;
                }
            free(y);
            printf(" %.4e %s |", norm > 0 ? e[f] / norm : 0.0, woolly_type_get(t[f]->type)->name);
        }
        if (nf == 3)
            printf(" %.3f |", e[1] > 0 ? e[2] / e[1] : 1.0);
        printf("\n");
        if (same_types) {
            for (int f = 1; f < nf; f++)
                tot_err[f] += e[f];
            tot_norm += norm;
            const double ratio = e[1] > 0 ? e[2] / e[1] : 1.0;
            lo_ratio = fmin(lo_ratio, ratio);
            hi_ratio = fmax(hi_ratio, ratio);
            n_same++;
            n_closer += e[2] < e[1];
            n_equal += e[2] == e[1];
        }
        free(x);
    }
    if (n_same == 0)
        printf("| all tensors of the same types | none: the files quantize no tensor alike |\n");
    else {
        printf("| all tensors of the same types |");
        for (int f = 1; f < nf; f++)
            printf(" %.4e |", tot_norm > 0 ? tot_err[f] / tot_norm : 0.0);
        if (nf == 3)
            printf(" %.3f (tensors %.3f-%.3f; closer in %d, the same in %d, of %d) |",
                   tot_err[1] > 0 ? tot_err[2] / tot_err[1] : 1.0, lo_ratio, hi_ratio, n_closer, n_equal,
                   n_same);
        printf("\n");
    }
    woolly_imatrix_file_free(im);
    for (int f = 0; f < nf; f++)
        gguf_close(g[f]);
    return 0;
}
