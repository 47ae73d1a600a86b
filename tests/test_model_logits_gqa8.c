/* A group of 8 query heads per KV head (Qwen3-MoE's, Qwen3-32B's) through the whole forward pass on int8
 * activations, where the attention tiles take rounded operands (BF16 on a CPU class whose profile takes
 * them, int16 at the AVX2 level): a two-layer qwen3 model of that group, Q8_0 weights, written by
 * `woolly synth` (SYNTH_ARGS), against the float64 logits that ../shared/tools/refforward.py computed from
 * the same file (tests/data/gqa8/README.md says how), at each ISA level this CPU runs (forced, one process
 * per level), with F16 and Q8_0 KV caches, the prompt in one batch (the tiles), token by token (the
 * one-query path's copy for a group of 8, attn/decode.c.j2) and in batches of 7. The tiny models of
 * ../shared/testdata all have groups of 2. */
#include "model_logits_check.h"

#include "context.h"

/* Two layers, 8 query heads of 128 sharing 1 KV head, Q8_0 matrices. */
#define SYNTH_ARGS                                                                                           \
    "--arch qwen3 --n-embd 256 --n-head 8 --n-head-kv 1 --head-dim 128 --n-ff 512 --n-layer 2 "             \
    "--n-vocab 320 --n-ctx 256 --type Q8_0 --seed 8"
#define GQA8_DATA WOOLLY_SOURCE_DIR "/tests/data/gqa8/"

/* The bars. The scalar level computes this model to 7e-8 with an F16 cache and 4.4e-5 with a Q8_0 one
 * (the cache's own 8-bit blocks); the vector levels' int8 activations add about 1.2e-4 (the AVX2 level,
 * whose attention takes int16 tiles: 1.25e-4 to 1.28e-4 with an F16 cache; 1.2e-4 is llama.cpp's
 * figure for tiny-llama-q8_0's 8-bit weights; AVX-512 with the BF16 tiles on a Zen 5: 1.28e-4 to
 * 1.31e-4). Bars: 1.5e-4, and 2e-4 with a Q8_0 cache (at most 1.74e-4 on the Zen 5). A wrong row, head or
 * position of the one-query path puts batch 1 at the order of 1 (0.34 for a P V that weighed each V row
 * by the probability of the row before it). */
#define GQA8_MAX_NMSE 1.5e-4
#define GQA8_Q8_0_MAX_NMSE 2e-4

static const char *gqa8_model(void)
{
    static char path[512];
    return synth_model(path, sizeof path, "qwen3-gqa8.gguf", SYNTH_ARGS);
}

static void check_level(const char *level)
{
    if (!enter_level(level, "qwen3-gqa8"))
        return;
    woolly_error err = {{0}};
    ref r = load_ref_files(GQA8_DATA "qwen3-g8.tokens.txt", GQA8_DATA "qwen3-g8.ref64.f32");
    woolly_model *m = woolly_model_load(gqa8_model(), &err);
    cr_assert(m != NULL, "%s", err.msg);
    cr_assert_eq(m->cfg.head_dim, 128);
    cr_assert_eq(m->cfg.n_head / m->cfg.n_head_kv, 8);
    cr_assert_eq(woolly_model_n_vocab(m), r.n_vocab, "vocabulary %d, reference rows of %d", woolly_model_n_vocab(m),
                 r.n_vocab);
    static const woolly_kv_type KV[] = {WOOLLY_KV_F16, WOOLLY_KV_Q8_0};
    static const char *const KV_NAME[] = {"f16", "q8_0"};
    for (size_t j = 0; j < sizeof KV / sizeof KV[0]; j++) {
        woolly_context_params p = woolly_context_default_params();
        p.kv_type = KV[j];
        p.n_ctx = r.n_tokens;
        woolly_context *c = woolly_context_create(m, &p, &err);
        cr_assert(c != NULL, "%s", err.msg);
        cr_assert(c->attn && c->attn_decode, "no attention kernels");
        fprintf(stderr, "qwen3-gqa8 WOOLLY_ISA=%-6s --kv-type %-4s: prefill %s, decode %s\n", level, KV_NAME[j],
                c->attn->name, c->attn_decode->name);
        woolly_context_close(c);
        const double bar = KV[j] == WOOLLY_KV_Q8_0 ? GQA8_Q8_0_MAX_NMSE : GQA8_MAX_NMSE;
        expect_synth_batches(m, &r, KV[j], "qwen3-gqa8", level, KV_NAME[j], bar);
    }
    woolly_model_close(m);
    free_ref(&r);
}

Test(logits_gqa8, scalar)
{
    check_level("scalar");
}

Test(logits_gqa8, avx2)
{
    check_level("avx2");
}

Test(logits_gqa8, avx512)
{
    check_level("avx512");
}
