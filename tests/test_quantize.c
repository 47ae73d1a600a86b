/* `woolly quantize` end to end: the Q4_K_M mix and quality against llama.cpp's file for the same F16
 * weights (tensor types exactly as in tiny-llama-q4_k_m.gguf; each tensor's RMS error at most
 * MAX_RMS_RATIO times llama.cpp's), the uniform types, metadata kept, thread-count independence, the
 * fallback for rows that are not whole K-blocks, and errors for bad arguments. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"
#include "quantize.h"
#include "gguf_check.h"
#include "testutil.h"

#define MAX_RMS_RATIO 1.02

static gguf_file *open_model(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "models/%s.gguf", name);
    return tu_gguf_open_data(rel);
}

/* Runs `woolly quantize <flags> <model> OUT TYPE`; returns OUT (heap). */
static char *quantize(const char *model, const char *type, const char *flags)
{
    char rel[128], out_name[128], args[8192];
    snprintf(rel, sizeof rel, "models/%s.gguf", model);
    snprintf(out_name, sizeof out_name, "%s-%s%s.gguf", model, type, flags[0] ? "-flags" : "");
    char *out = strdup(tu_tmp_path(out_name));
    cr_assert(out);
    snprintf(args, sizeof args, "quantize %s %s %s %s", flags, tu_data(rel), out, type);
    char *so, *se;
    const int st = tu_run_cli(args, &so, &se);
    cr_assert_eq(st, 0, "woolly %s exited %d: %s", args, st, se);
    free(so), free(se);
    return out;
}

static int64_t n_elems(const gguf_tensor *t)
{
    return (int64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
}

static float *dequantize_tensor(const gguf_tensor *t)
{
    float *y = malloc(sizeof(float) * (size_t)n_elems(t));
    cr_assert(y);
    cr_assert_eq(woolly_dequantize_row(t->type, t->data, y, n_elems(t)), 0, "%s", t->name);
    return y;
}

/* Every key of `in` is in `out` with the same value, except general.file_type, which is `file_type`. */
static void assert_metadata_kept(const gguf_file *in, const gguf_file *out, uint32_t file_type)
{
    for (uint64_t i = 0; i < in->n_kv; i++) {
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)in->kv[i].key.len, in->kv[i].key.ptr);
        const gguf_kv *o = gguf_find_kv(out, key);
        cr_assert(o != NULL, "key %s lost", key);
        if (strcmp(key, "general.file_type") != 0)
            cr_assert(tu_gguf_value_equal(&in->kv[i].value, &o->value), "key %s changed", key);
    }
    cr_assert_eq(tu_gguf_u32(out, "general.file_type"), file_type);
    cr_assert_eq(tu_gguf_u32(out, "general.quantization_version"), 2);
}

/* Same tensors in the same order with the same shapes, and the types of `want`. */
static void assert_tensors_like(const gguf_file *got, const gguf_file *src, const gguf_file *want)
{
    cr_assert_eq(got->n_tensors, src->n_tensors);
    for (uint64_t i = 0; i < got->n_tensors; i++) {
        const gguf_tensor *t = &got->tensors[i], *s = &src->tensors[i];
        cr_assert_str_eq(t->name, s->name, "tensor %llu", (unsigned long long)i);
        cr_assert(t->n_dims == s->n_dims && memcmp(t->ne, s->ne, sizeof t->ne) == 0, "%s: shape changed",
                  t->name);
        const gguf_tensor *w = gguf_find_tensor(want, t->name);
        cr_assert(w != NULL, "%s not in the reference file", t->name);
        cr_assert_eq(t->type, w->type, "%s: type %s, llama.cpp chose %s", t->name,
                     woolly_type_get(t->type)->name, woolly_type_get(w->type)->name);
    }
}

/* Per tensor, RMS(ours - source) <= MAX_RMS_RATIO * RMS(reference - source); F32 tensors identical. */
static void assert_quality(const gguf_file *got, const gguf_file *src, const gguf_file *ref)
{
    double worst = 0;
    for (uint64_t i = 0; i < got->n_tensors; i++) {
        const gguf_tensor *t = &got->tensors[i];
        const gguf_tensor *s = gguf_find_tensor(src, t->name), *r = gguf_find_tensor(ref, t->name);
        float *x = dequantize_tensor(s), *ours = dequantize_tensor(t), *theirs = dequantize_tensor(r);
        const size_t n = (size_t)n_elems(t);
        if (t->type == WOOLLY_TYPE_F32) {
            cr_assert(memcmp(x, ours, n * sizeof(float)) == 0, "%s: F32 tensor changed", t->name);
        } else {
            const double ratio = sqrt(tu_nmse(ours, x, n) / tu_nmse(theirs, x, n));
            cr_assert(ratio <= MAX_RMS_RATIO, "%s (%s): RMS error %.4fx llama.cpp's > %.2f", t->name,
                      woolly_type_get(t->type)->name, ratio, MAX_RMS_RATIO);
            worst = ratio > worst ? ratio : worst;
        }
        free(x), free(ours), free(theirs);
    }
    cr_log_info("worst per-tensor RMS error ratio against llama.cpp: %.4f", worst);
}

static void check_against_reference(const char *type, const char *reference, uint32_t file_type)
{
    char *out = quantize("tiny-llama-f16", type, "");
    gguf_file *got = tu_gguf_open(out), *src = open_model("tiny-llama-f16"), *ref = open_model(reference);
    assert_tensors_like(got, src, ref);
    assert_metadata_kept(src, got, file_type);
    assert_quality(got, src, ref);
    gguf_close(got), gguf_close(src), gguf_close(ref);
    remove(out);
    free(out);
}

Test(quantize, q4_k_m_matches_llama_cpp_types_and_quality)
{
    check_against_reference("Q4_K_M", "tiny-llama-q4_k_m", 15);
}

Test(quantize, q6_k_matches_llama_cpp)
{
    check_against_reference("Q6_K", "tiny-llama-q6_k", 18);
}

Test(quantize, q8_0_matches_llama_cpp)
{
    check_against_reference("Q8_0", "tiny-llama-q8_0", 7);
}

Test(quantize, f16_of_f16_copies_the_tensors)
{
    char *out = quantize("tiny-llama-f16", "F16", "");
    gguf_file *got = tu_gguf_open(out), *src = open_model("tiny-llama-f16");
    assert_metadata_kept(src, got, 1);
    cr_assert_eq(got->n_tensors, src->n_tensors);
    for (uint64_t i = 0; i < got->n_tensors; i++) {
        const gguf_tensor *t = &got->tensors[i], *s = &src->tensors[i];
        cr_assert(t->type == s->type && t->nbytes == s->nbytes && memcmp(t->data, s->data, t->nbytes) == 0,
                  "%s changed", t->name);
    }
    gguf_close(got), gguf_close(src);
    remove(out);
    free(out);
}

Test(quantize, f16_of_q8_0_rounds_each_value_once)
{
    char *out = quantize("tiny-llama-q8_0", "F16", "");
    gguf_file *got = tu_gguf_open(out), *src = open_model("tiny-llama-q8_0");
    assert_metadata_kept(src, got, 1);
    for (uint64_t i = 0; i < got->n_tensors; i++) {
        const gguf_tensor *t = &got->tensors[i], *s = &src->tensors[i];
        cr_assert_eq(t->type, s->n_dims == 1 ? WOOLLY_TYPE_F32 : WOOLLY_TYPE_F16, "%s", t->name);
        float *a = dequantize_tensor(t), *b = dequantize_tensor(s);
        for (int64_t j = 0; j < n_elems(t); j++)
            cr_assert(fabsf(a[j] - b[j]) <= ldexpf(fabsf(b[j]), -11), "%s[%lld]: %g vs %g", t->name,
                      (long long)j, a[j], b[j]);
        free(a), free(b);
    }
    gguf_close(got), gguf_close(src);
    remove(out);
    free(out);
}

/* BF16 (llama.cpp's file type 32): every matrix value rounded once to the nearest BF16, ties to even (so
 * within half a unit of its 8 significant bits), the 1-D tensors kept in F32. */
Test(quantize, bf16_of_f16_rounds_each_value_once)
{
    char *out = quantize("tiny-llama-f16", "BF16", "");
    gguf_file *got = tu_gguf_open(out), *src = open_model("tiny-llama-f16");
    assert_metadata_kept(src, got, 32);
    for (uint64_t i = 0; i < got->n_tensors; i++) {
        const gguf_tensor *t = &got->tensors[i], *s = &src->tensors[i];
        cr_assert_eq(t->type, s->n_dims == 1 ? WOOLLY_TYPE_F32 : WOOLLY_TYPE_BF16, "%s", t->name);
        float *a = dequantize_tensor(t), *b = dequantize_tensor(s);
        for (int64_t j = 0; j < n_elems(t); j++)
            cr_assert(fabsf(a[j] - b[j]) <= ldexpf(fabsf(b[j]), -8), "%s[%lld]: %g vs %g", t->name,
                      (long long)j, a[j], b[j]);
        free(a), free(b);
    }
    gguf_close(got), gguf_close(src);
    remove(out);
    free(out);
}

Test(quantize, output_does_not_depend_on_threads)
{
    char *one = quantize("tiny-llama-f16", "Q4_K_M", "-q -t 1");
    size_t n1, n3;
    char *a = tu_read_file(one, &n1);
    remove(one);
    char *three = quantize("tiny-llama-f16", "Q4_K_M", "-t 3");
    char *b = tu_read_file(three, &n3);
    remove(three);
    cr_assert(n1 == n3 && memcmp(a, b, n1) == 0, "-t 1 and -t 3 gave different files");
    free(a), free(b), free(one), free(three);
}

Test(quantize, rows_that_are_not_whole_k_blocks_fall_back)
{
    /* stories260K: rows of 64 and 172. As llama-quantize (d32676d77) writes its Q4_K_M: Q4_K falls back
     * to Q5_0 and Q6_K (the output, attn_v of layers 2 and 4) to Q8_0 in rows of 64; rows of 172 fit
     * no block of 32 either: F16. */
    char args[8192], *so, *se;
    char *out = strdup(tu_tmp_path("stories-q4km.gguf"));
    snprintf(args, sizeof args, "quantize %s %s Q4_K_M", tu_data("models/stories260K.gguf"), out);
    cr_assert_eq(tu_run_cli(args, &so, &se), 0, "%s", se);
    cr_assert(strstr(se, "not a multiple of 256") != NULL, "no note about the fallback: %s", se);
    gguf_file *got = tu_gguf_open(out), *src = open_model("stories260K");
    for (uint64_t i = 0; i < got->n_tensors; i++) {
        const gguf_tensor *t = &got->tensors[i];
        const bool more_bits = !strcmp(t->name, "output.weight") || !strcmp(t->name, "blk.2.attn_v.weight") ||
                               !strcmp(t->name, "blk.4.attn_v.weight");
        const enum woolly_type want = t->n_dims == 1      ? WOOLLY_TYPE_F32
                                      : t->ne[0] % 32 != 0 ? WOOLLY_TYPE_F16
                                      : more_bits          ? WOOLLY_TYPE_Q8_0
                                                           : WOOLLY_TYPE_Q5_0;
        cr_assert_eq(t->type, want, "%s (row %llu): %s", t->name, (unsigned long long)t->ne[0],
                     woolly_type_get(t->type)->name);
    }
    assert_metadata_kept(src, got, 15);
    gguf_close(got), gguf_close(src);
    free(so), free(se);
    remove(out);
    free(out);
}

Test(quantize, bad_arguments_fail_with_a_message)
{
    char args[16384], in[4096], out[4096];
    snprintf(in, sizeof in, "%s", tu_data("models/tiny-llama-f16.gguf"));
    snprintf(out, sizeof out, "%s", tu_tmp_path("never.gguf"));
    snprintf(args, sizeof args, "quantize %s %s Q3_K", in, out);
    tu_cli_fails(args, "unknown type 'Q3_K'");
    snprintf(args, sizeof args, "quantize %s %s", in, out);
    tu_cli_fails(args, "expected IN.gguf OUT.gguf TYPE, got 2 arguments");
    snprintf(args, sizeof args, "quantize -t 0 %s %s Q8_0", in, out);
    tu_cli_fails(args, "-t 0 is out of range [1, 256]");
    snprintf(args, sizeof args, "quantize -t many %s %s Q8_0", in, out);
    tu_cli_fails(args, "-t 'many' is not an integer");
    snprintf(args, sizeof args, "quantize --bogus %s %s Q8_0", in, out);
    tu_cli_fails(args, "unknown option '--bogus'");
    snprintf(args, sizeof args, "quantize %s/nope.gguf %s Q8_0", tu_data("models"), out);
    tu_cli_fails(args, "nope.gguf");
    /* not a GGUF file */
    snprintf(args, sizeof args, "quantize %s %s Q8_0", tu_data("README.md"), out);
    tu_cli_fails(args, "README.md");
    /* an output that cannot be written */
    snprintf(args, sizeof args, "quantize %s %s/no/such/dir/out.gguf Q8_0", in, tu_data("models"));
    tu_cli_fails(args, "out.gguf");
    FILE *f = fopen(out, "rb");
    cr_assert(f == NULL, "a failed run left %s behind", out);
}

/* The layers whose attn_v / ffn_down get Q6_K in Q4_K_M, as docs/BENCHMARK-MODELS.md lists them. */
static void check_more_bits_layers(int n_layer, const int *want, int n_want)
{
    const woolly_mix_model m = {.n_layer = n_layer, .tied_embd = false};
    const uint64_t ne[2] = {4096, 4096};
    int got = 0;
    for (int i = 0; i < n_layer; i++) {
        char v[64], d[64], q[64];
        snprintf(v, sizeof v, "blk.%d.attn_v.weight", i);
        snprintf(d, sizeof d, "blk.%d.ffn_down.weight", i);
        snprintf(q, sizeof q, "blk.%d.attn_q.weight", i);
        const enum woolly_type tv = woolly_mix_type(WOOLLY_FTYPE_Q4_K_M, v, 2, ne, &m, NULL, 0);
        cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q4_K_M, d, 2, ne, &m, NULL, 0), tv, "layer %d", i);
        cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q4_K_M, q, 2, ne, &m, NULL, 0), WOOLLY_TYPE_Q4_K);
        bool listed = false;
        for (int j = 0; j < n_want; j++)
            listed |= want[j] == i;
        cr_assert_eq(tv, listed ? WOOLLY_TYPE_Q6_K : WOOLLY_TYPE_Q4_K, "%d layers: layer %d got %s", n_layer,
                     i, woolly_type_get(tv)->name);
        got += tv == WOOLLY_TYPE_Q6_K;
    }
    cr_assert_eq(got, n_want);
}

Test(quantize, q4_k_m_mix_rule)
{
    static const int llama_1b[] = {0, 1, 4, 7, 10, 13, 14, 15};
    check_more_bits_layers(16, llama_1b, 8);
    static const int granite_8b[] = {0,  1,  2,  3,  4,  7,  10, 13, 16, 19,
                                     22, 25, 28, 31, 34, 35, 36, 37, 38, 39};
    check_more_bits_layers(40, granite_8b, 20);

    const uint64_t ne[2] = {4096, 49152}, odd[2] = {4000, 10}, odder[2] = {100, 10};
    const woolly_mix_model untied = {.n_layer = 40, .tied_embd = false},
                           tied = {.n_layer = 40, .tied_embd = true};
    cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q4_K_M, "token_embd.weight", 2, ne, &untied, NULL, 0),
                 WOOLLY_TYPE_Q4_K);
    cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q4_K_M, "token_embd.weight", 2, ne, &tied, NULL, 0),
                 WOOLLY_TYPE_Q6_K);
    cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q4_K_M, "output.weight", 2, ne, &untied, NULL, 0),
                 WOOLLY_TYPE_Q6_K);
    cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q4_K_M, "output_norm.weight", 1, ne, &untied, NULL, 0),
                 WOOLLY_TYPE_F32);
    cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_F16, "blk.0.attn_norm.weight", 1, ne, &untied, NULL, 0),
                 WOOLLY_TYPE_F32);
    char note[160];
    cr_assert_eq(
        woolly_mix_type(WOOLLY_FTYPE_Q6_K, "blk.0.attn_q.weight", 2, odd, &untied, note, sizeof note),
        WOOLLY_TYPE_Q8_0);
    cr_assert(strstr(note, "4000") && strstr(note, "Q8_0"), "note: %s", note);
    cr_assert_eq(
        woolly_mix_type(WOOLLY_FTYPE_Q8_0, "blk.0.attn_q.weight", 2, odder, &untied, note, sizeof note),
        WOOLLY_TYPE_F16);
    cr_assert(strstr(note, "100") && strstr(note, "F16"), "note: %s", note);
    cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q8_0, "blk.0.attn_q.weight", 2, ne, &untied, note, sizeof note),
                 WOOLLY_TYPE_Q8_0);
    cr_assert_str_eq(note, "");
}

/* Eight experts (Mixtral's shape): attn_k and attn_v Q8_0 and attn_output Q5_K in every layer, as
 * llama.cpp types them; the experts and attn_q follow the usual rule. Other expert counts do not. */
Test(quantize, q4_k_m_eight_expert_rule)
{
    const uint64_t ne[2] = {4096, 1024};
    const woolly_mix_model mixtral = {.n_layer = 32, .n_expert = 8},
                           granitemoe = {.n_layer = 32, .n_expert = 40};
    for (int i = 0; i < 32; i++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_k.weight", i);
        cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q4_K_M, name, 2, ne, &mixtral, NULL, 0), WOOLLY_TYPE_Q8_0);
        cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q4_K_M, name, 2, ne, &granitemoe, NULL, 0),
                     WOOLLY_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", i);
        cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q4_K_M, name, 2, ne, &mixtral, NULL, 0), WOOLLY_TYPE_Q8_0);
        snprintf(name, sizeof name, "blk.%d.attn_output.weight", i);
        cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q4_K_M, name, 2, ne, &mixtral, NULL, 0), WOOLLY_TYPE_Q5_K);
        cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q4_K_M, name, 2, ne, &granitemoe, NULL, 0),
                     WOOLLY_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", i);
        cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q4_K_M, name, 2, ne, &mixtral, NULL, 0), WOOLLY_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", i);
        cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q4_K_M, name, 3, ne, &mixtral, NULL, 0),
                     woolly_mix_type(WOOLLY_FTYPE_Q4_K_M, name, 3, ne, &granitemoe, NULL, 0));
    }
    /* the other file types are uniform */
    cr_assert_eq(woolly_mix_type(WOOLLY_FTYPE_Q6_K, "blk.0.attn_v.weight", 2, ne, &mixtral, NULL, 0),
                 WOOLLY_TYPE_Q6_K);
}

/* The rule reaches files: `woolly quantize` reads the expert count from the file's metadata (a Mixtral-style
 * file synthesized 256 wide, so that Q5_K's blocks divide its rows). */
Test(quantize, q4_k_m_of_an_eight_expert_file)
{
    char *src = strdup(tu_tmp_path("mixtral-256-f16.gguf"));
    char args[8192];
    snprintf(
        args, sizeof args,
        "synth -q --arch llama --n-embd 256 --n-ff 256 --n-expert 8 --n-expert-used 2 --n-layer 2 --n-head 4 "
        "--n-head-kv 2 --n-vocab 512 --type F16 -o %s",
        src);
    char *so, *se;
    cr_assert_eq(tu_run_cli(args, &so, &se), 0, "woolly %s: %s", args, se);
    free(so), free(se);
    char *out = strdup(tu_tmp_path("mixtral-256-q4_k_m.gguf"));
    snprintf(args, sizeof args, "quantize %s %s Q4_K_M", src, out);
    cr_assert_eq(tu_run_cli(args, &so, &se), 0, "woolly %s: %s", args, se);
    free(so), free(se);
    gguf_file *g = tu_gguf_open(out);
    static const struct {
        const char *name;
        enum woolly_type type;
    } want[] = {
        {"blk.0.attn_k.weight", WOOLLY_TYPE_Q8_0},        {"blk.1.attn_v.weight", WOOLLY_TYPE_Q8_0},
        {"blk.0.attn_output.weight", WOOLLY_TYPE_Q5_K},   {"blk.1.attn_q.weight", WOOLLY_TYPE_Q4_K},
        {"blk.0.ffn_gate_exps.weight", WOOLLY_TYPE_Q4_K}, {"blk.0.ffn_gate_inp.weight", WOOLLY_TYPE_F32}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const gguf_tensor *t = gguf_find_tensor(g, want[i].name);
        cr_assert(t, "%s missing", want[i].name);
        cr_assert_eq(t->type, want[i].type, "%s: %s, want %s", want[i].name, woolly_type_get(t->type)->name,
                     woolly_type_get(want[i].type)->name);
    }
    gguf_close(g);
    remove(src), remove(out);
    free(src), free(out);
}
