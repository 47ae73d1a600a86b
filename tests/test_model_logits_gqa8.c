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
#include "registry.h"

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
    if (!path[0]) {
        snprintf(path, sizeof path, "%s", tu_tmp_path("qwen3-gqa8.gguf"));
        char args[1024], *err;
        snprintf(args, sizeof args, "synth " SYNTH_ARGS " -q -o %s", path);
        cr_assert_eq(tu_run_cli(args, NULL, &err), 0, "woolly %s: %s", args, err);
        free(err);
    }
    return path;
}

static ref gqa8_ref(void)
{
    ref r;
    char *txt = tu_read_file(GQA8_DATA "qwen3-g8.tokens.txt", NULL);
    r.n_tokens = tu_parse_ids(txt, &r.ids);
    free(txt);
    size_t size;
    r.logits = (float *)tu_read_file(GQA8_DATA "qwen3-g8.ref64.f32", &size);
    cr_assert(r.n_tokens > 0 && size % ((size_t)r.n_tokens * sizeof(float)) == 0, "reference size %zu", size);
    r.n_vocab = (int)(size / sizeof(float) / (size_t)r.n_tokens);
    return r;
}

static void check_level(const char *level)
{
    setenv("WOOLLY_ISA", level, 1);
    woolly_error err = {{0}};
    if (!cpu_runs(level)) { /* not measured here; the level is refused, not silently replaced */
        cr_expect_neq(woolly_isa_init(&err), 0, "WOOLLY_ISA=%s accepted on a CPU without it", level);
        fprintf(stderr, "NMSE qwen3-gqa8 WOOLLY_ISA=%-6s: this CPU cannot run it, not measured\n", level);
        return;
    }
    cr_assert_eq(woolly_isa_init(&err), 0, "%s", err.msg);
    cr_assert_str_eq(woolly_isa_name(woolly_isa_active()), level);

    ref r = gqa8_ref();
    woolly_model *m = woolly_model_load(gqa8_model(), &err);
    cr_assert(m != NULL, "%s", err.msg);
    cr_assert_eq(m->cfg.head_dim, 128);
    cr_assert_eq(m->cfg.n_head / m->cfg.n_head_kv, 8);
    cr_assert_eq(woolly_model_n_vocab(m), r.n_vocab, "vocabulary %d, reference rows of %d", woolly_model_n_vocab(m),
                 r.n_vocab);
    static const woolly_kv_type KV[] = {WOOLLY_KV_F16, WOOLLY_KV_Q8_0};
    static const char *const KV_NAME[] = {"f16", "q8_0"};
    static const int BATCHES[] = {512, 1, 7};
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
        for (size_t b = 0; b < sizeof BATCHES / sizeof BATCHES[0]; b++) {
            float *x = api_logits_kv(m, &r, BATCHES[b], 2, r.n_tokens, KV[j]);
            const double e = mean_nmse(x, r.logits, r.n_tokens, r.n_vocab);
            fprintf(stderr, "NMSE qwen3-gqa8 WOOLLY_ISA=%-6s --kv-type %-4s batch %3d: %.3g (bar %.2g)\n", level,
                    KV_NAME[j], BATCHES[b], e, bar);
            cr_expect_leq(e, bar,
                          "WOOLLY_ISA=%s, %s cache, batch %d: NMSE %.3g exceeds %.2g (if woolly synth's output "
                          "changed, remake the reference: tests/data/gqa8/README.md)",
                          level, KV_NAME[j], BATCHES[b], e, bar);
            free(x);
        }
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
