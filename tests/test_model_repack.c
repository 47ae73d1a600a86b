/* The repack at load reads the weights from the file (gguf_read, a few row groups per step) rather than
 * through the mapping: both ways must give the same repacked bytes, whatever the step size. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "model.h"
#include "registry.h"
#include "testutil.h"

/* Bytes a matrix takes in its layout: whole row groups. */
static size_t layout_bytes(const woolly_matrix *w)
{
    const int64_t g = w->layout->rows;
    return w->row_bytes * (size_t)((w->rows + g - 1) / g * g);
}

/* The model at rel, loaded from the file with steps of scratch bytes, against the same file parsed from
 * a buffer (repacked from the buffer itself). */
static void check_same_repack(const char *rel, size_t scratch)
{
    const char *path = tu_data(rel);
    woolly_error err = {{0}};
    const size_t saved = woolly_repack_scratch_bytes;
    woolly_repack_scratch_bytes = scratch;
    woolly_model *from_file = woolly_model_load(path, &err);
    woolly_repack_scratch_bytes = saved;
    cr_assert(from_file, "%s: %s", path, err.msg);
    cr_assert_geq(from_file->file->fd, 0, "a model opened from a path keeps its file open for the repack");

    size_t size;
    char *buf = tu_read_file(path, &size);
    gguf_file *g = gguf_parse(buf, size, &err);
    cr_assert(g, "%s", err.msg);
    cr_assert_eq(g->fd, -1);
    woolly_model *from_buf = woolly_model_from_gguf(g, rel, &err);
    cr_assert(from_buf, "%s", err.msg);

    cr_assert_eq(from_file->n_mats, from_buf->n_mats);
    int repacked = 0;
    for (int32_t i = 0; i < from_file->n_mats; i++) {
        const woolly_matrix *a = from_file->mats[i], *b = from_buf->mats[i];
        cr_assert_eq(a->layout, b->layout, "%s: matrix %s", rel, a->name);
        if (!a->layout)
            continue;
        repacked++;
        cr_assert(memcmp(a->data, b->data, layout_bytes(a)) == 0,
                  "%s: matrix %s repacked differently (step %zu)", rel, a->name, scratch);
    }
    cr_assert_gt(repacked, 0, "%s: no matrix was repacked at this ISA level", rel);
    woolly_model_close(from_file);
    woolly_model_close(from_buf);
    free(buf);
}

Test(model_repack, file_reads_give_the_buffer_repack_q4_k_m)
{
    check_same_repack("models/tiny-llama-q4_k_m.gguf", (size_t)4 << 20);
}

Test(model_repack, one_row_group_per_read_step)
{
    check_same_repack("models/tiny-llama-q4_k_m.gguf", 1);
    check_same_repack("models/tiny-llama-q6_k.gguf", 1);
}

Test(model_repack, granite_shapes)
{
    check_same_repack("models/tiny-granite-q4_k_m.gguf", 1);
}

/* The activation formats of a model's Q8_0 matrices: in a K-quant mix, where the other matrices run on
 * int8 activations, the int8 ones too (where this level has them, GEMV and GEMM); in a Q8_0 file, the
 * Q8_0 default (F16 activations, for its accuracy). */
static void check_q8_0_formats(const char *path, bool mix)
{
    woolly_error err = {{0}};
    woolly_model *m = woolly_model_load(path, &err);
    cr_assert(m, "%s: %s", path, err.msg);
    const woolly_kernel *dflt = woolly_kernel_default_gemv(WOOLLY_TYPE_Q8_0, -1);
    const woolly_kernel *int8 = woolly_kernel_default_gemv(WOOLLY_TYPE_Q8_0, WOOLLY_ACT_Q8);
    cr_assert(dflt != NULL);
    bool kquant_int8 = false;
    int n_q8_0 = 0;
    for (int32_t i = 0; i < m->n_mats; i++)
        if (m->mats[i]->type != WOOLLY_TYPE_Q8_0)
            kquant_int8 |= m->mats[i]->act == WOOLLY_ACT_Q8;
    const enum woolly_act want = mix && kquant_int8 && int8 ? WOOLLY_ACT_Q8 : dflt->act;
    for (int32_t i = 0; i < m->n_mats; i++) {
        const woolly_matrix *w = m->mats[i];
        if (w->type != WOOLLY_TYPE_Q8_0)
            continue;
        n_q8_0++;
        cr_expect_eq(w->act, want, "%s: matrix %s takes activations %d, not %d", path, w->name, (int)w->act,
                     (int)want);
    }
    cr_assert_gt(n_q8_0, 0, "%s has no Q8_0 matrix", path);
    woolly_model_close(m);
}

Test(model_repack, q8_0_matrices_of_a_k_quant_mix_take_int8_activations)
{
    /* 160 columns are not whole K-quant blocks: those matrices are Q8_0, the others Q4_K and Q6_K */
    char path[4096]; /* tu_tmp_path's buffer is reused by tu_run_cli */
    snprintf(path, sizeof path, "%s", tu_tmp_path("mix160.gguf"));
    char *args = malloc(strlen(path) + 128);
    sprintf(args, "synth --preset tiny --n-embd 160 --n-head 2 --n-head-kv 2 --n-ff 512 -q -o %s", path);
    char *out = NULL, *errs = NULL;
    cr_assert_eq(tu_run_cli(args, &out, &errs), 0, "woolly %s failed: %s", args, errs);
    free(out);
    free(errs);
    free(args);
    check_q8_0_formats(path, true);
    remove(path);
    check_q8_0_formats(tu_data("models/tiny-llama-q8_0.gguf"), false);
}
