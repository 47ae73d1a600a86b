/* Head dimension 96 (Phi-3-mini's 3072 / 32) through the whole forward pass: a two-layer phi3 model of that
 * head size, written by `woolly synth` (SYNTH_ARGS), against the float64 logits that
 * ../shared/tools/refforward.py computed from the same file (tests/data/hd96/README.md says how), at each
 * ISA level this CPU runs (forced, one process per level), with F16, F32 and Q8_0 KV caches (96 values
 * are three Q8_0 blocks), the prompt in one batch (the tiles), token by token (the one-query path) and in
 * batches of 7 (partial tiles). At each level the context's attention kernels are the tiled ones of head
 * dimension 96 (attn/flash.c.j2 and its one-query path), not the untiled any-dimension reference. */
#include "model_logits_check.h"

#include "context.h"
#include "registry.h"

/* Two layers, 4 query heads of 96 sharing 2 KV heads (a group of 2), F16 weights. */
#define SYNTH_ARGS                                                                                           \
    "--arch phi3 --n-embd 384 --n-head 4 --n-head-kv 2 --n-ff 512 --n-layer 2 --n-vocab 320 --n-ctx 256 "   \
    "--type F16 --seed 96"
#define HD96_DATA WOOLLY_SOURCE_DIR "/tests/data/hd96/"

/* The bars: the phi3 family's (model_logits_check.h; SCALAR_MAX_NMSE at the scalar level) with F16 and
 * F32 caches; with a Q8_0 cache the F16-weight families' 3e-4 (the cache's own rounding). */
#define HD96_MAX_NMSE 1e-5
#define HD96_Q8_0_MAX_NMSE 3e-4

static const char *hd96_model(void)
{
    static char path[512];
    return synth_model(path, sizeof path, "phi3-hd96.gguf", SYNTH_ARGS);
}

/* The tiled kernel of head dimension 96 at the forced level (or, beside int8 matmuls, its rounded-operand
 * twin at that level), for prefill and for decode. */
static void expect_tiled_d96(const woolly_kernel *k, const char *what, enum woolly_isa level)
{
    cr_assert(k != NULL, "%s: no attention kernel", what);
    cr_expect_eq(k->head_dim, 96, "%s: %s serves head_dim %d, not the tiles of 96", what, k->name, k->head_dim);
    cr_expect(strstr(k->name, "_flash_") && strstr(k->name, "_d96_"), "%s: %s is not a d96 tile", what,
              k->name);
    cr_expect_eq((int)k->isa, (int)level, "%s: %s is not of level %s", what, k->name, woolly_isa_name(level));
}

static void check_level(const char *level)
{
    if (!enter_level(level, "phi3-hd96"))
        return;
    woolly_error err = {{0}};
    const enum woolly_isa isa = woolly_isa_active();
    for (int c = 0; c < 3; c++) {
        const enum woolly_type t = c == 0 ? WOOLLY_TYPE_F16 : c == 1 ? WOOLLY_TYPE_F32 : WOOLLY_TYPE_Q8_0;
        expect_tiled_d96(woolly_kernel_choose_attn(t, 96, WOOLLY_ACT_F32), "registry, F32 tiles", isa);
    }

    ref r = load_ref_files(HD96_DATA "phi3-hd96.tokens.txt", HD96_DATA "phi3-hd96.ref64.f32");
    woolly_model *m = woolly_model_load(hd96_model(), &err);
    cr_assert(m != NULL, "%s", err.msg);
    cr_assert_eq(m->cfg.head_dim, 96);
    cr_assert_eq(woolly_model_n_vocab(m), r.n_vocab, "vocabulary %d, reference rows of %d", woolly_model_n_vocab(m),
                 r.n_vocab);
    static const woolly_kv_type KV[] = {WOOLLY_KV_F16, WOOLLY_KV_F32, WOOLLY_KV_Q8_0};
    static const char *const KV_NAME[] = {"f16", "f32", "q8_0"};
    for (size_t j = 0; j < sizeof KV / sizeof KV[0]; j++) {
        woolly_context_params p = woolly_context_default_params();
        p.kv_type = KV[j];
        p.n_ctx = r.n_tokens;
        woolly_context *c = woolly_context_create(m, &p, &err);
        cr_assert(c != NULL, "%s", err.msg);
        expect_tiled_d96(c->attn, "context, prefill", isa);
        cr_expect(c->attn_decode && c->attn_decode->head_dim == 96, "context, decode: %s",
                  c->attn_decode ? c->attn_decode->name : "none");
        woolly_context_close(c);
        const double bar = KV[j] == WOOLLY_KV_Q8_0 ? HD96_Q8_0_MAX_NMSE
                           : !strcmp(level, "scalar") ? SCALAR_MAX_NMSE
                                                      : HD96_MAX_NMSE;
        expect_synth_batches(m, &r, KV[j], "phi3-hd96", level, KV_NAME[j], bar);
    }
    woolly_model_close(m);
    free_ref(&r);
}

Test(logits_hd96, scalar)
{
    check_level("scalar");
}

Test(logits_hd96, avx2)
{
    check_level("avx2");
}

Test(logits_hd96, avx512)
{
    check_level("avx512");
}
