/* The importance statistics (woolly_imatrix_*, `woolly imatrix`): llama.cpp's imatrix GGUF layout and
 * keys, the counts of the tokens evaluated (per expert for a mixture of experts), and the sums checked
 * against an independent computation: layer 0's attention reads the RMS-normed token embeddings, which
 * the test computes from the file's own tensors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_check.h"
#include "testutil.h"
#include "woolly.h"

#define N_TOK 48

static const float *tensor_f32(const gguf_file *g, const char *name, uint64_t ne0, uint64_t ne1)
{
    const gguf_tensor *t = gguf_find_tensor(g, name);
    cr_assert(t != NULL, "no tensor %s", name);
    cr_assert_eq(t->type, WOOLLY_TYPE_F32, "%s", name);
    cr_assert(t->ne[0] == ne0 && t->ne[1] == ne1, "%s: [%llu, %llu], expected [%llu, %llu]", name,
              (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)ne0,
              (unsigned long long)ne1);
    return t->data;
}

/* Evaluates tokens 0, 1, ..., in two batches, with statistics attached, and saves them to path. */
static void collect(const char *model_path, int32_t n_tok, int32_t n_batch, const char *path, int32_t *tokens)
{
    woolly_model *m = woolly_model_open(model_path);
    cr_assert(m != NULL, "%s", woolly_last_error());
    woolly_context_params p = woolly_context_default_params();
    p.n_ctx = 256;
    p.n_batch = n_batch;
    p.n_threads = 2;
    woolly_context *c = woolly_context_open(m, &p);
    woolly_imatrix *im = woolly_imatrix_open(m);
    cr_assert(c && im, "%s", woolly_last_error());
    cr_assert_eq(woolly_context_set_imatrix(c, im), 0, "%s", woolly_last_error());
    const int32_t n_vocab = woolly_model_n_vocab(m);
    for (int32_t i = 0; i < n_tok; i++)
        tokens[i] = (int32_t)((7 + 13 * i) % n_vocab);
    for (int32_t i0 = 0; i0 < n_tok; i0 += n_batch)
        cr_assert_eq(woolly_eval(c, tokens + i0, n_tok - i0 < n_batch ? n_tok - i0 : n_batch), 0, "%s",
                     woolly_last_error());
    cr_assert_eq(woolly_imatrix_save(im, path, "test tokens", 1, (uint32_t)n_tok), 0, "%s",
                 woolly_last_error());
    woolly_context_close(c);
    woolly_imatrix_close(im);
    woolly_model_close(m);
}

Test(imatrix, layer_zero_matches_the_normed_embeddings)
{
    const char *path = tu_tmp_path("stories.imatrix");
    int32_t tokens[N_TOK];
    collect(tu_data("models/stories260K.gguf"), N_TOK, 20, path, tokens);

    gguf_file *g = tu_gguf_open(path), *model = tu_gguf_open_data("models/stories260K.gguf");
    gguf_str type;
    cr_assert(gguf_get_str(g, "general.type", &type, NULL) && gguf_str_eq(type, "imatrix"));
    uint32_t chunks = 0, chunk_size = 0;
    cr_assert(gguf_get_u32(g, "imatrix.chunk_count", &chunks, NULL) && chunks == 1);
    cr_assert(gguf_get_u32(g, "imatrix.chunk_size", &chunk_size, NULL) && chunk_size == N_TOK);
    const gguf_array *datasets;
    cr_assert(gguf_get_arr(g, "imatrix.datasets", GGUF_STRING, &datasets, NULL) && datasets->n == 1);
    /* 5 layers x 7 matrices, a sum and a count each; no output matrix */
    cr_expect_eq(g->n_tensors, 5 * 7 * 2);
    cr_expect(gguf_find_tensor(g, "output.weight.in_sum2") == NULL);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (strstr(g->tensors[i].name, ".counts"))
            cr_expect_eq(((const float *)g->tensors[i].data)[0], (float)N_TOK, "%s", g->tensors[i].name);

    /* layer 0: x = embedding / rms(embedding) * attn_norm, summed squared per column */
    enum { D = 64 };
    const float *emb = tensor_f32(model, "token_embd.weight", D, 512);
    const float *norm = tensor_f32(model, "blk.0.attn_norm.weight", D, 1);
    float eps = 0;
    cr_assert(gguf_get_f32(model, "llama.attention.layer_norm_rms_epsilon", &eps, NULL));
    double want[D] = {0};
    for (int t = 0; t < N_TOK; t++) {
        const float *e = emb + (size_t)tokens[t] * D;
        double ss = 0;
        for (int j = 0; j < D; j++)
            ss += (double)e[j] * e[j];
        const double inv = 1.0 / sqrt(ss / D + eps);
        for (int j = 0; j < D; j++) {
            const double x = e[j] * inv * norm[j];
            want[j] += x * x;
        }
    }
    const char *names[] = {"blk.0.attn_q.weight.in_sum2", "blk.0.attn_k.weight.in_sum2",
                           "blk.0.attn_v.weight.in_sum2"};
    for (int k = 0; k < 3; k++) {
        const float *got = tensor_f32(g, names[k], D, 1);
        for (int j = 0; j < D; j++)
            cr_expect(fabs(got[j] - want[j]) <= 1e-4 * want[j] + 1e-6, "%s[%d]: %g, expected %g", names[k], j,
                      got[j], want[j]);
    }
    /* deeper layers saw other inputs: positive sums, not a copy of layer 0's */
    const float *l1 = tensor_f32(g, "blk.1.attn_q.weight.in_sum2", D, 1);
    const float *down = tensor_f32(g, "blk.4.ffn_down.weight.in_sum2", 172, 1);
    cr_expect(l1[0] > 0 && fabs(l1[0] - want[0]) > 1e-3 * want[0]);
    for (int j = 0; j < 172; j++)
        cr_expect(down[j] > 0 && isfinite(down[j]), "ffn_down[%d] = %g", j, down[j]);
    gguf_close(g);
    gguf_close(model);
}

/* A mixture of experts: one tensor per expert matrix, a row per expert; each token counts once for each
 * of the k experts it is routed to, whichever path (a lone token, a batch) evaluated it. */
Test(imatrix, experts_count_their_own_tokens)
{
    const char *path = tu_tmp_path("moe.imatrix");
    int32_t tokens[N_TOK];
    collect(tu_data("models/tiny-qwen3moe-f16.gguf"), N_TOK, 1, path, tokens);
    gguf_file *g = tu_gguf_open(path), *model = tu_gguf_open_data("models/tiny-qwen3moe-f16.gguf");
    uint32_t n_expert = 0, k = 0, n_layer = 0;
    cr_assert(gguf_get_u32(model, "qwen3moe.expert_count", &n_expert, NULL));
    cr_assert(gguf_get_u32(model, "qwen3moe.expert_used_count", &k, NULL));
    cr_assert(gguf_get_u32(model, "qwen3moe.block_count", &n_layer, NULL));
    for (uint32_t l = 0; l < n_layer; l++) {
        const char *kinds[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
        for (int i = 0; i < 3; i++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%u.%s.weight.counts", l, kinds[i]);
            const float *counts = tensor_f32(g, name, 1, n_expert);
            double sum = 0;
            for (uint32_t e = 0; e < n_expert; e++)
                sum += counts[e];
            cr_expect_eq(sum, (double)N_TOK * k, "%s: %g routed tokens", name, sum);
        }
        char name[96];
        snprintf(name, sizeof name, "blk.%u.ffn_gate_inp.weight.counts", l);
        cr_expect_eq(tensor_f32(g, name, 1, 1)[0], (float)N_TOK, "%s", name);
    }
    gguf_close(g);
    gguf_close(model);
}

Test(imatrix, the_command_writes_the_file_and_refuses_bad_input)
{
    char text[1024], out[1024]; /* tu_tmp_path's buffer is reused by the next call */
    snprintf(text, sizeof text, "%s", tu_tmp_path("imatrix.txt"));
    snprintf(out, sizeof out, "%s", tu_tmp_path("cli.imatrix"));
    FILE *f = fopen(text, "w");
    cr_assert(f != NULL);
    for (int i = 0; i < 60; i++)
        fprintf(f, "Once upon a time, a little dog named Max found a red ball in the park. ");
    fclose(f);
    char args[16384], *o = NULL, *e = NULL;
    snprintf(args, sizeof args, "imatrix -m %s -f %s -o %s -c 128 --chunks 3 -q",
             tu_data("models/stories260K.gguf"), text, out);
    cr_assert_eq(tu_run_cli(args, &o, &e), 0, "%s", e);
    free(o), free(e);
    gguf_file *g = tu_gguf_open(out);
    uint32_t chunks = 0, size = 0;
    cr_expect(gguf_get_u32(g, "imatrix.chunk_count", &chunks, NULL) && chunks == 3);
    cr_expect(gguf_get_u32(g, "imatrix.chunk_size", &size, NULL) && size == 128);
    cr_expect_eq(tensor_f32(g, "blk.2.ffn_up.weight.counts", 1, 1)[0], 3 * 128);
    gguf_close(g);

    static const struct {
        const char *args;
        int status;
        const char *says;
    } BAD[] = {
        {"-c 128", 2, "-o FILE is required"},       /* no -o */
        {"-o %s -c 4", 2, "too small"},             /* -c below a chunk's minimum */
        {"-o %s -c 100000 --chunks 1", 1, "chunk"}, /* the text is shorter than one chunk */
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        char extra[1200];
        snprintf(extra, sizeof extra, BAD[i].args, out);
        snprintf(args, sizeof args, "imatrix -m %s -f %s %s", tu_data("models/stories260K.gguf"), text,
                 extra);
        cr_expect_eq(tu_run_cli(args, &o, &e), BAD[i].status, "%s: %s", args, e);
        cr_expect(strstr(e, BAD[i].says) != NULL, "%s: expected '%s' in %s", args, BAD[i].says, e);
        free(o), free(e);
    }
}
