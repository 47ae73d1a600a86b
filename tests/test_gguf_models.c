/* The GGUF reader on every shared model and vocabulary file: known key values, tensor counts, types
 * and shapes (from the test data README), and data ranges that tile the data section. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gguf.h"
#include "kernels.h"
#include "gguf_check.h"
#include "testutil.h"

static void assert_str(const gguf_file *g, const char *key, const char *want)
{
    woolly_error err = {{0}};
    gguf_str s;
    cr_assert(gguf_get_str(g, key, &s, &err), "key %s: %s", key, err.msg);
    cr_assert(gguf_str_eq(s, want), "key %s is '%.*s', expected '%s'", key, (int)s.len, s.ptr, want);
}

static uint64_t arr_len(const gguf_file *g, const char *key, enum gguf_vtype elem)
{
    woolly_error err = {{0}};
    const gguf_array *a = NULL;
    cr_assert(gguf_get_arr(g, key, elem, &a, &err), "key %s: %s", key, err.msg);
    return a->n;
}

static const gguf_tensor *tensor(const gguf_file *g, const char *name)
{
    const gguf_tensor *t = gguf_find_tensor(g, name);
    cr_assert(t != NULL, "tensor %s missing", name);
    return t;
}

static void assert_shape(const gguf_tensor *t, uint32_t n_dims, uint64_t ne0, uint64_t ne1)
{
    cr_assert_eq(t->n_dims, n_dims, "%s: n_dims %u", t->name, t->n_dims);
    cr_assert_eq(t->ne[0], ne0, "%s: ne0 %lu", t->name, (unsigned long)t->ne[0]);
    cr_assert_eq(t->ne[1], ne1, "%s: ne1 %lu", t->name, (unsigned long)t->ne[1]);
    cr_assert_eq(t->ne[2], 1);
    cr_assert_eq(t->ne[3], 1);
}

/* Tensors are stored back to back (each padded to the alignment) and fill the file exactly: a check
 * that offsets, sizes and the data section start all agree with the file. */
static void assert_data_tiles_file(const gguf_file *g)
{
    uint64_t end = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        const woolly_type_info *ti = woolly_type_get(t->type);
        cr_assert(ti != NULL);
        uint64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        cr_assert_eq(t->nbytes, n / ti->block_elems * ti->block_bytes, "%s", t->name);
        cr_assert_eq(t->offset % g->alignment, 0);
        cr_assert_eq((const uint8_t *)t->data, g->buf + g->data_offset + t->offset);
        if (t->offset + t->nbytes > end)
            end = t->offset + t->nbytes;
    }
    cr_assert_eq(g->data_offset % g->alignment, 0);
    cr_assert_eq(g->data_offset + end, g->size, "data ends at %lu, file size %zu",
                 (unsigned long)(g->data_offset + end), g->size);
}

static bool is_norm(const char *name)
{
    return strstr(name, "_norm.weight") != NULL;
}

Test(gguf_models, stories260K)
{
    gguf_file *g = tu_gguf_open_data("models/stories260K.gguf");
    cr_assert_eq(g->version, 3);
    cr_assert_eq(g->n_kv, 19);
    cr_assert_eq(g->n_tensors, 48); /* 3 global + 5 layers x 9 */
    cr_assert_eq(g->alignment, 32);
    assert_str(g, "general.architecture", "llama");
    assert_str(g, "tokenizer.ggml.model", "llama");
    cr_assert_eq(tu_gguf_u32(g, "llama.embedding_length"), 64);
    cr_assert_eq(tu_gguf_u32(g, "llama.block_count"), 5);
    cr_assert_eq(tu_gguf_u32(g, "llama.attention.head_count"), 8);
    cr_assert_eq(tu_gguf_u32(g, "llama.attention.head_count_kv"), 4);
    cr_assert_eq(tu_gguf_u32(g, "llama.feed_forward_length"), 172);
    cr_assert_eq(tu_gguf_u32(g, "tokenizer.ggml.bos_token_id"), 1);
    cr_assert_eq(tu_gguf_u32(g, "tokenizer.ggml.eos_token_id"), 2);
    cr_assert_float_eq(tu_gguf_f32(g, "llama.attention.layer_norm_rms_epsilon"), 1e-5f, 1e-9f);
    cr_assert_eq(arr_len(g, "tokenizer.ggml.tokens", GGUF_STRING), 512);
    cr_assert_eq(arr_len(g, "tokenizer.ggml.scores", GGUF_F32), 512);
    cr_assert_eq(arr_len(g, "tokenizer.ggml.token_type", GGUF_I32), 512);

    /* No rope.freq_base: absent is not an error, and err says so. */
    woolly_error err = {{0}};
    strcpy(err.msg, "stale");
    float base = -1;
    cr_assert_not(gguf_get_f32(g, "llama.rope.freq_base", &base, &err));
    cr_assert_eq(err.msg[0], 0);
    cr_assert_eq(base, -1);

    const gguf_array *tokens = NULL;
    cr_assert(gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_STRING, &tokens, &err));
    cr_assert(gguf_str_eq(tokens->strs[0], "<unk>"));
    cr_assert(gguf_str_eq(tokens->strs[1], "<s>"));
    cr_assert(gguf_str_eq(tokens->strs[2], "</s>"));

    for (uint64_t i = 0; i < g->n_tensors; i++)
        cr_assert_eq(g->tensors[i].type, WOOLLY_TYPE_F32, "%s", g->tensors[i].name);
    assert_shape(tensor(g, "token_embd.weight"), 2, 64, 512);
    assert_shape(tensor(g, "output.weight"), 2, 64, 512);
    assert_shape(tensor(g, "output_norm.weight"), 1, 64, 1);
    assert_shape(tensor(g, "blk.4.attn_k.weight"), 2, 64, 32);
    assert_shape(tensor(g, "blk.2.ffn_down.weight"), 2, 172, 64);
    assert_shape(tensor(g, "blk.0.ffn_gate.weight"), 2, 64, 172);
    cr_assert_null(gguf_find_tensor(g, "blk.5.attn_q.weight"));
    assert_data_tiles_file(g);

    /* A trained RMSNorm weight: finite, positive-ish, not all equal. */
    const float *norm = tensor(g, "output_norm.weight")->data;
    float lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < 64; i++) {
        float v;
        memcpy(&v, &norm[i], 4);
        cr_assert(isfinite(v));
        lo = fminf(lo, v);
        hi = fmaxf(hi, v);
    }
    cr_assert_lt(lo, hi);
    gguf_close(g);
}

static void check_tiny_hparams(const gguf_file *g, const char *arch)
{
    char key[128];
    assert_str(g, "general.architecture", arch);
#define HP(suffix, want)                                                                                     \
    snprintf(key, sizeof key, "%s." suffix, arch);                                                           \
    cr_assert_eq(tu_gguf_u32(g, key), want, "%s", key)
    HP("embedding_length", 256);
    HP("feed_forward_length", 768);
    HP("block_count", 2);
    HP("attention.head_count", 4);
    HP("attention.head_count_kv", 2);
    HP("context_length", 512);
    HP("rope.dimension_count", 64);
#undef HP
}

/* tiny-llama-*: 2 layers x 9 tensors + token_embd, output_norm, output. */
static gguf_file *open_tiny_llama(const char *rel)
{
    gguf_file *g = tu_gguf_open_data(rel);
    cr_assert_eq(g->version, 3);
    cr_assert_eq(g->n_tensors, 21);
    check_tiny_hparams(g, "llama");
    cr_assert_float_eq(tu_gguf_f32(g, "llama.rope.freq_base"), 10000.0f, 1e-3f);
    assert_str(g, "tokenizer.ggml.model", "llama");
    cr_assert_eq(arr_len(g, "tokenizer.ggml.tokens", GGUF_STRING), 32000);
    cr_assert_eq(tu_gguf_u32(g, "llama.vocab_size"), 32000);
    bool add_bos = false;
    woolly_error err = {{0}};
    cr_assert(gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos, &err));
    cr_assert(add_bos);
    assert_shape(tensor(g, "token_embd.weight"), 2, 256, 32000);
    assert_shape(tensor(g, "output.weight"), 2, 256, 32000);
    assert_shape(tensor(g, "blk.1.ffn_down.weight"), 2, 768, 256);
    assert_shape(tensor(g, "blk.0.attn_v.weight"), 2, 256, 128);
    assert_data_tiles_file(g);
    return g;
}

Test(gguf_models, tiny_llama_q4_k_m_types)
{
    gguf_file *g = open_tiny_llama("models/tiny-llama-q4_k_m.gguf");
    int n_q6 = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        enum woolly_type want = WOOLLY_TYPE_Q4_K;
        if (is_norm(t->name))
            want = WOOLLY_TYPE_F32;
        else if (!strcmp(t->name, "output.weight") || !strcmp(t->name, "blk.1.attn_v.weight") ||
                 !strcmp(t->name, "blk.1.ffn_down.weight"))
            want = WOOLLY_TYPE_Q6_K;
        cr_assert_eq(t->type, want, "%s is %s", t->name, woolly_type_get(t->type)->name);
        n_q6 += t->type == WOOLLY_TYPE_Q6_K;
    }
    cr_assert_eq(n_q6, 3);
    cr_assert_eq(tu_gguf_u32(g, "general.file_type"), 15); /* MOSTLY_Q4_K_M */
    gguf_close(g);
}

static void assert_matrices_are(const gguf_file *g, enum woolly_type type)
{
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        cr_assert_eq(t->type, is_norm(t->name) ? WOOLLY_TYPE_F32 : type, "%s", t->name);
    }
}

Test(gguf_models, tiny_llama_q6_k)
{
    gguf_file *g = open_tiny_llama("models/tiny-llama-q6_k.gguf");
    assert_matrices_are(g, WOOLLY_TYPE_Q6_K);
    gguf_close(g);
}

Test(gguf_models, tiny_llama_q8_0)
{
    gguf_file *g = open_tiny_llama("models/tiny-llama-q8_0.gguf");
    assert_matrices_are(g, WOOLLY_TYPE_Q8_0);
    gguf_close(g);
}

Test(gguf_models, tiny_llama_f16_weights_are_n_0_002)
{
    gguf_file *g = open_tiny_llama("models/tiny-llama-f16.gguf");
    assert_matrices_are(g, WOOLLY_TYPE_F16);
    /* The README says the weights are N(0, 0.02): the data pointer must land on them. */
    const gguf_tensor *t = tensor(g, "blk.0.ffn_up.weight");
    const uint8_t *p = t->data;
    double sum = 0, sum2 = 0;
    uint64_t n = t->ne[0] * t->ne[1];
    for (uint64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        double v = woolly_f16_to_f32(h);
        sum += v;
        sum2 += v * v;
    }
    double mean = sum / (double)n, sd = sqrt(sum2 / (double)n - mean * mean);
    cr_assert_lt(fabs(mean), 1e-3, "mean %g", mean);
    cr_assert(sd > 0.018 && sd < 0.022, "sd %g", sd);
    gguf_close(g);
}

Test(gguf_models, tiny_granite)
{
    gguf_file *g = tu_gguf_open_data("models/tiny-granite-q4_k_m.gguf");
    cr_assert_eq(g->n_tensors, 20); /* tied embeddings: no output.weight */
    cr_assert_null(gguf_find_tensor(g, "output.weight"));
    check_tiny_hparams(g, "granite");
    cr_assert_float_eq(tu_gguf_f32(g, "granite.rope.freq_base"), 1e7f, 1.0f);
    cr_assert_float_eq(tu_gguf_f32(g, "granite.embedding_scale"), 12.0f, 1e-6f);
    cr_assert_float_eq(tu_gguf_f32(g, "granite.residual_scale"), 0.22f, 1e-6f);
    cr_assert_float_eq(tu_gguf_f32(g, "granite.attention.scale"), 0.0078125f, 1e-9f);
    cr_assert_float_eq(tu_gguf_f32(g, "granite.logit_scale"), 16.0f, 1e-6f);
    assert_str(g, "tokenizer.ggml.model", "gpt2");
    assert_str(g, "tokenizer.ggml.pre", "starcoder");
    cr_assert_eq(arr_len(g, "tokenizer.ggml.tokens", GGUF_STRING), 49152);
    cr_assert_eq(arr_len(g, "tokenizer.ggml.merges", GGUF_STRING), 48872);
    assert_shape(tensor(g, "token_embd.weight"), 2, 256, 49152);
    cr_assert_eq(tensor(g, "token_embd.weight")->type, WOOLLY_TYPE_Q6_K);
    cr_assert_eq(tensor(g, "blk.0.attn_q.weight")->type, WOOLLY_TYPE_Q4_K);
    cr_assert_eq(tensor(g, "blk.1.ffn_norm.weight")->type, WOOLLY_TYPE_F32);
    assert_data_tiles_file(g);
    gguf_close(g);
}

static void check_vocab(const char *rel, const char *arch, const char *model, const char *pre,
                        uint64_t n_vocab, uint64_t n_merges)
{
    gguf_file *g = tu_gguf_open_data(rel);
    cr_assert_eq(g->n_tensors, 0);
    cr_assert_eq(g->data_offset, g->size, "a vocabulary file's (empty) data section is at its end");
    assert_str(g, "general.architecture", arch);
    assert_str(g, "tokenizer.ggml.model", model);
    assert_str(g, "tokenizer.ggml.pre", pre);
    cr_assert_eq(arr_len(g, "tokenizer.ggml.tokens", GGUF_STRING), n_vocab);
    cr_assert_eq(arr_len(g, "tokenizer.ggml.token_type", GGUF_I32), n_vocab);
    if (n_merges)
        cr_assert_eq(arr_len(g, "tokenizer.ggml.merges", GGUF_STRING), n_merges);
    else
        cr_assert_null(gguf_find_kv(g, "tokenizer.ggml.merges"));
    gguf_close(g);
}

Test(gguf_models, vocab_files)
{
    check_vocab("vocab/ggml-vocab-llama-spm.gguf", "llama", "llama", "default", 32000, 0);
    check_vocab("vocab/ggml-vocab-gpt-2.gguf", "gpt2", "gpt2", "gpt-2", 50257, 50000);
    check_vocab("vocab/ggml-vocab-starcoder.gguf", "starcoder2", "gpt2", "starcoder", 49152, 48872);
}

Test(gguf_models, gpt2_vocab_strings)
{
    gguf_file *g = tu_gguf_open_data("vocab/ggml-vocab-gpt-2.gguf");
    const gguf_array *tok = NULL, *merges = NULL;
    woolly_error err = {{0}};
    cr_assert(gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_STRING, &tok, &err));
    cr_assert(gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_STRING, &merges, &err));
    cr_assert(gguf_str_eq(tok->strs[0], "!"));
    cr_assert(gguf_str_eq(tok->strs[50256], "<|endoftext|>"));
    cr_assert(gguf_str_eq(merges->strs[0], "\xc4\xa0 t")); /* "Ġ t" */
    cr_assert_eq(tu_gguf_u32(g, "tokenizer.ggml.bos_token_id"), 50256);
    const gguf_array *types = NULL;
    cr_assert(gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_I32, &types, &err));
    cr_assert_eq(gguf_arr_i64(types, 50256), 3, "token_type of <|endoftext|> is CONTROL");
    cr_assert_eq(gguf_arr_i64(types, 0), 1);
    gguf_close(g);
}

Test(gguf_models, typed_getters_reject_wrong_types)
{
    gguf_file *g = tu_gguf_open_data("models/stories260K.gguf");
    woolly_error err = {{0}};
    uint32_t u = 0;
    float f = 0;
    gguf_str s;
    const gguf_array *a = NULL;
    cr_assert_not(gguf_get_u32(g, "general.architecture", &u, &err));
    cr_assert(strstr(err.msg, "general.architecture") && strstr(err.msg, "string"), "%s", err.msg);
    cr_assert_not(gguf_get_f32(g, "llama.block_count", &f, &err));
    cr_assert(strstr(err.msg, "llama.block_count"), "%s", err.msg);
    cr_assert_not(gguf_get_str(g, "llama.block_count", &s, &err));
    cr_assert(err.msg[0]);
    cr_assert_not(gguf_get_arr(g, "tokenizer.ggml.scores", GGUF_I32, &a, &err));
    cr_assert(strstr(err.msg, "array of f32"), "%s", err.msg);
    cr_assert_not(gguf_get_u32(g, "no.such.key", &u, &err));
    cr_assert_eq(err.msg[0], 0);
    gguf_close(g);
}

Test(gguf_models, open_names_the_path)
{
    woolly_error err = {{0}};
    cr_assert_null(gguf_open("/nonexistent/dir/model.gguf", &err));
    cr_assert(strstr(err.msg, "/nonexistent/dir/model.gguf"), "%s", err.msg);
    /* A text file is not GGUF. */
    const char *path = tu_data("vocab/ggml-vocab-gpt-2.gguf.inp");
    cr_assert_null(gguf_open(path, &err));
    cr_assert(strstr(err.msg, path) && strstr(err.msg, "magic"), "%s", err.msg);
    cr_assert_null(gguf_open(tu_data("models"), &err));
    cr_assert(strstr(err.msg, "not a regular file"), "%s", err.msg);
}
