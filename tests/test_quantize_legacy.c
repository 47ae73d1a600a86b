/* `woolly quantize` to the 32-value mixes (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) end to end, on tiny-llama-f16:
 * the tensor types llama.cpp's mix gives (llama-quant.cpp), and the quantized model's logits against the
 * float64 reference of the F16 weights, through the default dispatch (the int8 kernels where the CPU runs
 * them) at batches of 512 and 1, and through the scalar reference kernels (WOOLLY_ISA=scalar): the
 * difference of the two is the kernels' own error, held to the int8 kernels' usual bar. */
#include "model_logits_check.h"

#include "gguf.h"
#include "gguf_check.h"
#include "quantize.h"
#include "wtype.h"

/* Mean NMSE of the quantized model's logits against the F16 weights' float64 reference: the weights'
 * rounding, through a random model's 2 layers. Measured (default dispatch, AVX2, batch 512): Q4_0 3.4e-2,
 * Q4_1 2.5e-2, Q5_0 9.3e-3, Q5_1 6.9e-3, IQ4_NL 3.4e-2; llama-quantize's files of the same F16 weights, run
 * the same way: Q4_0 3.4e-2, Q5_1 8.6e-3, IQ4_NL 3.3e-2. The bars leave 1.5x. */
static const struct {
    const char *type;
    enum woolly_type base;
    double max_nmse;
} MIXES[] = {
    {"Q4_0", WOOLLY_TYPE_Q4_0, 5.1e-2},   {"Q4_1", WOOLLY_TYPE_Q4_1, 3.7e-2},
    {"Q5_0", WOOLLY_TYPE_Q5_0, 1.4e-2},   {"Q5_1", WOOLLY_TYPE_Q5_1, 1.05e-2},
    {"IQ4_NL", WOOLLY_TYPE_IQ4_NL, 5.1e-2},
};
/* The default dispatch against the scalar kernels on the same quantized file: int8 activations (a
 * rounding of every matmul's input) and summation order, as for llama.cpp's quantized files (their bars
 * in model_logits_check.h, 1.2e-4 .. 2.3e-4); measured 1.1e-4 .. 1.3e-4 on AVX2. */
#define KERNELS_MAX_NMSE 2.5e-4

/* Runs `woolly quantize -q tiny-llama-f16 OUT TYPE`; returns OUT (heap). */
static char *quantize(const char *type)
{
    char out_name[128], args[8192];
    snprintf(out_name, sizeof out_name, "tiny-llama-%s.gguf", type);
    char *out = strdup(tu_tmp_path(out_name));
    cr_assert(out);
    snprintf(args, sizeof args, "quantize -q %s %s %s", model_path("tiny-llama-f16"), out, type);
    char *se;
    const int st = tu_run_cli(args, NULL, &se);
    cr_assert_eq(st, 0, "woolly %s exited %d: %s", args, st, se);
    free(se);
    return out;
}

/* The type llama.cpp's mix of `base` gives tensor t of a model of n_layer layers and n_gqa query heads per
 * KV head (quant_mix.c, legacy_mix_type). */
static enum woolly_type want_type(const gguf_tensor *t, enum woolly_type base, int n_layer, int n_gqa)
{
    if (t->n_dims < 2)
        return WOOLLY_TYPE_F32;
    if (!strcmp(t->name, "output.weight"))
        return t->ne[0] % 256 == 0 ? WOOLLY_TYPE_Q6_K : WOOLLY_TYPE_Q8_0;
    if (base == WOOLLY_TYPE_IQ4_NL) {
        int layer = -1;
        sscanf(t->name, "blk.%d.", &layer);
        const enum woolly_type more = t->ne[0] % 256 == 0 ? WOOLLY_TYPE_Q5_K : WOOLLY_TYPE_Q5_1;
        if (strstr(t->name, "attn_v.weight") && n_gqa >= 4)
            return more;
        if (strstr(t->name, "ffn_down.weight") && layer >= 0 && layer < n_layer / 8)
            return more;
    }
    return base;
}

static void check_mix(int i)
{
    char *path = quantize(MIXES[i].type);
    gguf_file *g = tu_gguf_open(path);
    const int n_layer = (int)tu_gguf_u32(g, "llama.block_count");
    const int n_gqa = (int)(tu_gguf_u32(g, "llama.attention.head_count") / tu_gguf_u32(g, "llama.attention.head_count_kv"));
    int n_base = 0;
    for (uint64_t j = 0; j < g->n_tensors; j++) {
        const gguf_tensor *t = &g->tensors[j];
        const enum woolly_type want = want_type(t, MIXES[i].base, n_layer, n_gqa);
        cr_assert_eq(t->type, want, "%s: %s is %s, llama.cpp's mix gives %s", MIXES[i].type, t->name,
                     woolly_type_get(t->type)->name, woolly_type_get(want)->name);
        n_base += t->type == MIXES[i].base;
    }
    cr_assert_gt(n_base, 0, "%s: no tensor of the mix's type", MIXES[i].type);
    gguf_close(g);

    ref r = load_ref("tiny-llama-f16");
    woolly_model *m = woolly_model_open(path);
    cr_assert(m != NULL, "%s", woolly_last_error());
    float *x512 = api_logits(m, &r, 512, 2, r.n_tokens), *x1 = api_logits(m, &r, 1, 2, r.n_tokens);
    woolly_model_close(m);
    const double e512 = mean_nmse(x512, r.logits, r.n_tokens, r.n_vocab);
    const double e1 = mean_nmse(x1, r.logits, r.n_tokens, r.n_vocab);
    fprintf(stderr, "NMSE tiny-llama %-6s against the F16 reference: batch 512 %.3g, batch 1 %.3g (bar %.2g)\n",
            MIXES[i].type, e512, e1, MIXES[i].max_nmse);
    cr_expect_leq(e512, MIXES[i].max_nmse, "%s, batch 512: NMSE %.3g", MIXES[i].type, e512);
    cr_expect_leq(e1, MIXES[i].max_nmse, "%s, batch 1: NMSE %.3g", MIXES[i].type, e1);

    /* the scalar reference kernels on the same file, through the command */
    char args[16384], ids[4096] = "", out[4096];
    for (int t = 0; t < r.n_tokens; t++)
        snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", t ? "," : "", r.ids[t]);
    snprintf(out, sizeof out, "%s", tu_tmp_path("legacy-logits.f32"));
    snprintf(args, sizeof args, "logits -m %s --tokens %s -o %s -b 512 -t 2", path, ids, out);
    setenv("WOOLLY_ISA", "scalar", 1);
    char *err;
    const int st = tu_run_cli(args, NULL, &err);
    unsetenv("WOOLLY_ISA");
    cr_assert_eq(st, 0, "woolly %s failed: %s", args, err);
    free(err);
    size_t size;
    float *xs = (float *)tu_read_file(out, &size);
    remove(out);
    cr_assert_eq(size, (size_t)r.n_tokens * r.n_vocab * sizeof(float));
    const double es = mean_nmse(xs, r.logits, r.n_tokens, r.n_vocab);
    const double ek = mean_nmse(x512, xs, r.n_tokens, r.n_vocab);
    fprintf(stderr, "NMSE tiny-llama %-6s scalar kernels against the F16 reference %.3g; default dispatch "
                    "against the scalar kernels %.3g (bar %.2g)\n",
            MIXES[i].type, es, ek, KERNELS_MAX_NMSE);
    cr_expect_leq(es, MIXES[i].max_nmse, "%s, scalar kernels: NMSE %.3g", MIXES[i].type, es);
    cr_expect_leq(ek, KERNELS_MAX_NMSE, "%s: default dispatch against the scalar kernels: NMSE %.3g",
                  MIXES[i].type, ek);
    free(xs), free(x512), free(x1);
    free_ref(&r);
    remove(path);
    free(path);
}

Test(quantize_legacy, q4_0)
{
    check_mix(0);
}
Test(quantize_legacy, q4_1)
{
    check_mix(1);
}
Test(quantize_legacy, q5_0)
{
    check_mix(2);
}
Test(quantize_legacy, q5_1)
{
    check_mix(3);
}
Test(quantize_legacy, iq4_nl)
{
    check_mix(4);
}

/* Rows that are no whole block of 32 cannot take these types: F16, and a note says so (llama.cpp stops
 * there with an error). */
Test(quantize_legacy, rows_that_are_not_whole_blocks_fall_back)
{
    const uint64_t ne[2] = {100, 64}, ne_out[2] = {96, 64};
    const woolly_mix_model m = {.n_layer = 8, .n_gqa = 4};
    char note[160];
    cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q4_0, "blk.0.attn_q.weight", 2, ne, &m, note, sizeof note),
                 WOOLLY_TYPE_F16);
    cr_assert(strstr(note, "100") && strstr(note, "F16"), "note: %s", note);
    /* the output matrix of rows that are no whole Q6_K blocks: Q8_0, as llama.cpp */
    cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_IQ4_NL, "output.weight", 2, ne_out, &m, note, sizeof note),
                 WOOLLY_TYPE_Q8_0);
    /* IQ4_NL's Q5_K for attn_v falls back to Q5_1 on such rows, as llama.cpp's does */
    cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_IQ4_NL, "blk.3.attn_v.weight", 2, (const uint64_t[]){96, 64}, &m, note,
                                 sizeof note),
                 WOOLLY_TYPE_Q5_1);
    cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_IQ4_NL, "blk.3.attn_v.weight", 2, (const uint64_t[]){256, 64}, &m,
                                 note, sizeof note),
                 WOOLLY_TYPE_Q5_K);
    cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_IQ4_NL, "blk.3.ffn_down.weight", 2, (const uint64_t[]){256, 64}, &m,
                                 note, sizeof note),
                 WOOLLY_TYPE_IQ4_NL);
    cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_IQ4_NL, "blk.0.ffn_down.weight", 2, (const uint64_t[]){256, 64}, &m,
                                 note, sizeof note),
                 WOOLLY_TYPE_Q5_K);
    cr_assert_eq(woolly_ftype_from_name("IQ4_NL"), WOOLLY_FTYPE_IQ4_NL);
    cr_assert_str_eq(woolly_ftype_name(WOOLLY_FTYPE_Q5_1), "Q5_1");
}
