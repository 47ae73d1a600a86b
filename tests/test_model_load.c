/* Model loading and validation on small synthesized files: a valid llama (and one with tied
 * embeddings) opens and evaluates, and so does a model of each other family (its own tensors: qwen2's
 * biases, qwen3's head norms, phi3's fused matrices, gemma3's norms); every defect (architecture,
 * hyperparameter, missing tensor, shape, type without a kernel, unexpected tensor) is refused with a
 * message naming it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "testutil.h"
#include "woolly.h"
#include "wtype.h"

typedef struct spec {
    const char *arch;
    int n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    bool omit_eps, tied;
    const char *skip;  /* a tensor left out */
    const char *wide;  /* a tensor written with one row too many */
    const char *extra; /* an extra tensor of n_embd floats */
    const char *no_kernel; /* a tensor written as Q8_1 (a known type without kernels) */
} spec;

static spec base(void)
{
    return (spec){.arch = "llama",
                  .n_embd = 32,
                  .n_layer = 1,
                  .n_head = 4,
                  .n_head_kv = 2,
                  .n_ff = 64,
                  .n_vocab = 40,
                  .n_ctx = 64};
}

/* Sets "<arch>.<k>". */
static void set_u32(gguf_writer *w, const spec *s, const char *k, int v)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", s->arch, k);
    gguf_writer_set_u32(w, key, (uint32_t)v);
}

typedef struct tensor_def {
    char name[64];
    int64_t cols, rows; /* rows 0: a vector */
} tensor_def;

static int tensor_list(const spec *s, tensor_def *t)
{
    int n = 0;
    const int hd = s->n_embd / s->n_head;
    t[n++] = (tensor_def){"token_embd.weight", s->n_embd, s->n_vocab};
    t[n++] = (tensor_def){"output_norm.weight", s->n_embd, 0};
    if (!s->tied)
        t[n++] = (tensor_def){"output.weight", s->n_embd, s->n_vocab};
    for (int l = 0; l < s->n_layer; l++) {
        const int64_t q = (int64_t)s->n_head * hd, kv = (int64_t)s->n_head_kv * hd;
        const bool fused = !strcmp(s->arch, "phi3");
        const bool biases = !strcmp(s->arch, "qwen2");
        const bool head_norms = !strcmp(s->arch, "qwen3") || !strcmp(s->arch, "gemma3");
        const bool post_norms = !strcmp(s->arch, "gemma3");
        const struct {
            const char *suffix;
            int64_t cols, rows;
            bool present;
        } L[] = {
            {"attn_norm.weight", s->n_embd, 0, true},
            {"attn_q.weight", s->n_embd, q, !fused},
            {"attn_k.weight", s->n_embd, kv, !fused},
            {"attn_v.weight", s->n_embd, kv, !fused},
            {"attn_qkv.weight", s->n_embd, q + 2 * kv, fused},
            {"attn_q.bias", q, 0, biases},
            {"attn_k.bias", kv, 0, biases},
            {"attn_v.bias", kv, 0, biases},
            {"attn_q_norm.weight", hd, 0, head_norms},
            {"attn_k_norm.weight", hd, 0, head_norms},
            {"attn_output.weight", q, s->n_embd, true},
            {"post_attention_norm.weight", s->n_embd, 0, post_norms},
            {"ffn_norm.weight", s->n_embd, 0, true},
            {"ffn_gate.weight", s->n_embd, s->n_ff, !fused},
            {"ffn_up.weight", s->n_embd, fused ? 2 * s->n_ff : s->n_ff, true},
            {"ffn_down.weight", s->n_ff, s->n_embd, true},
            {"post_ffw_norm.weight", s->n_embd, 0, post_norms},
        };
        for (size_t i = 0; i < sizeof L / sizeof L[0]; i++) {
            if (!L[i].present)
                continue;
            t[n] = (tensor_def){"", L[i].cols, L[i].rows};
            snprintf(t[n].name, sizeof t[n].name, "blk.%d.%s", l, L[i].suffix);
            n++;
        }
    }
    if (s->extra) {
        t[n] = (tensor_def){"", s->n_embd, 0};
        snprintf(t[n].name, sizeof t[n].name, "%s", s->extra);
        n++;
    }
    return n;
}

/* Writes the model described by s; returns its path. */
static const char *write_model(const spec *s)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s", tu_tmp_path("synth.gguf"));
    woolly_error err = {{0}};
    gguf_writer *w = gguf_writer_open(path, &err);
    cr_assert(w != NULL, "%s", err.msg);
    gguf_writer_set_str(w, "general.architecture", s->arch);
    gguf_writer_set_str(w, "general.name", "synthetic test model");
    set_u32(w, s, "embedding_length", s->n_embd);
    set_u32(w, s, "block_count", s->n_layer);
    set_u32(w, s, "attention.head_count", s->n_head);
    set_u32(w, s, "attention.head_count_kv", s->n_head_kv);
    set_u32(w, s, "feed_forward_length", s->n_ff);
    set_u32(w, s, "context_length", s->n_ctx);
    if (!s->omit_eps) {
        char k[128];
        snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", s->arch);
        gguf_writer_set_f32(w, k, 1e-5f);
    }

    tensor_def t[64];
    const int n = tensor_list(s, t);
    size_t max_bytes = 0;
    for (int i = 0; i < n; i++) {
        if (s->skip && !strcmp(t[i].name, s->skip))
            continue;
        const bool q = s->no_kernel && !strcmp(t[i].name, s->no_kernel);
        const uint64_t rows =
            (uint64_t)(t[i].rows ? t[i].rows : 1) + (s->wide && !strcmp(t[i].name, s->wide));
        const uint64_t ne[2] = {(uint64_t)t[i].cols, rows};
        const uint32_t dims = rows > 1 ? 2 : 1;
        cr_assert_geq(gguf_writer_add_tensor(w, t[i].name, q ? WOOLLY_TYPE_Q8_1 : WOOLLY_TYPE_F32, dims, ne),
                      0);
        const size_t b = woolly_row_bytes(WOOLLY_TYPE_F32, t[i].cols) * rows;
        max_bytes = b > max_bytes ? b : max_bytes;
    }
    cr_assert_eq(gguf_writer_write_header(w, &err), 0, "%s", err.msg);
    float *data = malloc(max_bytes);
    cr_assert(data != NULL);
    tu_rng rng = {42};
    for (int i = 0; i < n; i++) {
        if (s->skip && !strcmp(t[i].name, s->skip))
            continue;
        const bool q = s->no_kernel && !strcmp(t[i].name, s->no_kernel);
        const uint64_t rows =
            (uint64_t)(t[i].rows ? t[i].rows : 1) + (s->wide && !strcmp(t[i].name, s->wide));
        const size_t count = (size_t)t[i].cols * rows;
        for (size_t j = 0; j < count; j++)
            data[j] = t[i].rows ? 0.1f * tu_rand_normal(&rng) : 1.0f; /* norms: ones */
        const size_t bytes = q ? woolly_row_bytes(WOOLLY_TYPE_Q8_1, t[i].cols) * rows : count * sizeof(float);
        if (q)
            memset(data, 0, bytes);
        cr_assert_eq(gguf_writer_write_data(w, data, bytes, &err), 0, "%s", err.msg);
    }
    free(data);
    cr_assert_eq(gguf_writer_close(w, &err), 0, "%s", err.msg);
    return path;
}

static void expect_refused(const spec *s, const char *needle1, const char *needle2)
{
    const char *path = write_model(s);
    woolly_model *m = woolly_model_open(path);
    cr_expect_null(m, "a defective model was accepted (expected: %s %s)", needle1, needle2 ? needle2 : "");
    woolly_model_close(m);
    const char *msg = woolly_last_error();
    cr_expect(strstr(msg, needle1) != NULL, "message does not mention '%s': %s", needle1, msg);
    if (needle2)
        cr_expect(strstr(msg, needle2) != NULL, "message does not mention '%s': %s", needle2, msg);
    remove(path);
}

static void expect_evaluates(const spec *s)
{
    const char *path = write_model(s);
    woolly_model *m = woolly_model_open(path);
    cr_assert(m != NULL, "%s", woolly_last_error());
    cr_expect_eq(woolly_model_n_vocab(m), s->n_vocab);
    cr_expect_str_eq(woolly_model_arch(m), s->arch);
    woolly_context_params p = woolly_context_default_params();
    p.n_threads = 2;
    woolly_context *c = woolly_context_open(m, &p);
    cr_assert(c != NULL, "%s", woolly_last_error());
    cr_expect_eq(woolly_context_n_ctx(c), s->n_ctx, "default context: the trained length");
    const woolly_token ids[3] = {1, 7, 39};
    cr_assert_eq(woolly_eval(c, ids, 3), 0, "%s", woolly_last_error());
    const float *l = woolly_get_logits(c, -1);
    cr_assert(l != NULL);
    double sum = 0;
    for (int i = 0; i < s->n_vocab; i++)
        sum += (double)l[i] * l[i];
    cr_expect(sum > 0 && sum < 1e12, "logits are not finite and non-zero (sum of squares %g)", sum);
    /* No tokenizer in the file: text needs one, token ids do not. */
    woolly_token out[8];
    cr_expect_eq(woolly_model_tokenize(m, "hi", 2, false, false, out, 8), -1);
    cr_expect(strstr(woolly_last_error(), "tokenizer") != NULL, "%s", woolly_last_error());
    woolly_context_close(c);
    woolly_model_close(m);
    remove(path);
}

Test(model_load, a_valid_model_opens_and_evaluates)
{
    spec s = base();
    expect_evaluates(&s);
}

Test(model_load, tied_embeddings_serve_as_the_output_matrix)
{
    spec s = base();
    s.tied = true;
    expect_evaluates(&s);
}

Test(model_load, each_family_opens_and_evaluates)
{
    static const char *const FAMILIES[] = {"qwen2", "qwen3", "phi3"};
    for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++) {
        spec s = base();
        s.arch = FAMILIES[i];
        s.tied = i != 2;
        expect_evaluates(&s);
    }
}

/* A file of a known family without one of its own tensors, or with one of the wrong shape. */
Test(model_load, a_familys_tensor_missing_or_misshapen)
{
    static const struct {
        const char *arch, *skip, *wide, *shape;
    } CASES[] = {
        {"qwen2", "blk.0.attn_k.bias", "blk.0.attn_v.bias", "has shape [16, 2, 1, 1], expected [16]"},
        {"qwen3", "blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight",
         "has shape [8, 2, 1, 1], expected [8]"},
        {"phi3", "blk.0.attn_qkv.weight", "blk.0.attn_qkv.weight",
         "has shape [32, 65, 1, 1], expected [32, 64] (ne[0] = row length)"},
        {"phi3", "blk.0.ffn_up.weight", "blk.0.ffn_up.weight",
         "has shape [32, 129, 1, 1], expected [32, 128]"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        spec s = base();
        s.arch = CASES[i].arch;
        s.skip = CASES[i].skip;
        char want[128];
        snprintf(want, sizeof want, "tensor '%s' is missing (required by the %s architecture)", s.skip,
                 s.arch);
        expect_refused(&s, want, NULL);
        s.skip = NULL;
        s.wide = CASES[i].wide;
        snprintf(want, sizeof want, "tensor '%s' %s", s.wide, CASES[i].shape);
        expect_refused(&s, want, NULL);
    }
}

/* gemma3's own tensors (sliding-window attention runs once the attention bounds its window). */
Test(model_load, a_gemma3_tensor_missing_or_misshapen)
{
    spec s = base();
    s.arch = "gemma3";
    s.tied = true;
    expect_evaluates(&s);
    s.skip = "blk.0.post_ffw_norm.weight";
    expect_refused(&s, "tensor 'blk.0.post_ffw_norm.weight' is missing (required by the gemma3 architecture)",
                   NULL);
    s.skip = NULL;
    s.wide = "blk.0.attn_q_norm.weight";
    expect_refused(&s, "tensor 'blk.0.attn_q_norm.weight' has shape [8, 2, 1, 1], expected [8]", NULL);
}

Test(model_load, unsupported_architecture)
{
    spec s = base();
    s.arch = "gpt2";
    expect_refused(&s, "architecture 'gpt2' is not supported", NULL);
}

Test(model_load, missing_hyperparameter)
{
    spec s = base();
    s.omit_eps = true;
    expect_refused(&s, "llama.attention.layer_norm_rms_epsilon", "missing");
}

Test(model_load, missing_tensor)
{
    spec s = base();
    s.skip = "blk.0.ffn_up.weight";
    expect_refused(&s, "'blk.0.ffn_up.weight' is missing", NULL);
    s.skip = "output_norm.weight";
    expect_refused(&s, "'output_norm.weight' is missing", NULL);
}

Test(model_load, wrong_shape)
{
    spec s = base();
    s.wide = "blk.0.attn_k.weight";
    expect_refused(&s, "'blk.0.attn_k.weight' has shape [32, 17, 1, 1], expected [32, 16]", NULL);
    s.wide = "blk.0.ffn_norm.weight";
    expect_refused(&s, "'blk.0.ffn_norm.weight' has shape [32, 2, 1, 1], expected [32]", NULL);
}

Test(model_load, type_without_a_kernel)
{
    spec s = base();
    s.no_kernel = "blk.0.attn_q.weight";
    expect_refused(&s, "'blk.0.attn_q.weight' has type Q8_1, which has no matrix kernel", NULL);
}

Test(model_load, unexpected_tensors)
{
    spec s = base();
    s.extra = "blk.0.attn_q.bias";
    expect_refused(&s, "'blk.0.attn_q.bias' is not part of the llama architecture", NULL);
    s.extra = "blk.1.attn_norm.weight";
    expect_refused(&s, "'blk.1.attn_norm.weight' belongs to a block beyond block_count 1", NULL);
}

Test(model_load, heads_that_cannot_be_grouped)
{
    spec s = base();
    s.n_head_kv = 3;
    expect_refused(&s, "4 query heads cannot be shared evenly by 3 key/value heads", NULL);
}

Test(model_load, head_dimension_beyond_the_kernels)
{
    spec s = base();
    s.n_embd = 1024;
    s.n_head = 2;
    s.n_head_kv = 2;
    expect_refused(&s, "head dimension 512 exceeds the supported 256", NULL);
}

Test(model_load, not_a_gguf_file)
{
    const char *path = tu_tmp_path("not.gguf");
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL);
    fputs("this is not a model\n", f);
    fclose(f);
    cr_expect_null(woolly_model_open(path));
    cr_expect(strstr(woolly_last_error(), "not.gguf") != NULL, "%s", woolly_last_error());
    remove(path);
    cr_expect_null(woolly_model_open("/no/such/file.gguf"));
    cr_expect(strstr(woolly_last_error(), "/no/such/file.gguf") != NULL, "%s", woolly_last_error());
}
