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
    if (!path[0]) {
        snprintf(path, sizeof path, "%s", tu_tmp_path("phi3-hd96.gguf"));
        char args[1024], *err;
        snprintf(args, sizeof args, "synth " SYNTH_ARGS " -q -o %s", path);
        cr_assert_eq(tu_run_cli(args, NULL, &err), 0, "woolly %s: %s", args, err);
        free(err);
    }
    return path;
}

static ref hd96_ref(void)
{
    ref r;
    char *txt = tu_read_file(HD96_DATA "phi3-hd96.tokens.txt", NULL);
    r.n_tokens = tu_parse_ids(txt, &r.ids);
    free(txt);
    size_t size;
    r.logits = (float *)tu_read_file(HD96_DATA "phi3-hd96.ref64.f32", &size);
    cr_assert(r.n_tokens > 0 && size % ((size_t)r.n_tokens * sizeof(float)) == 0, "reference size %zu", size);
    r.n_vocab = (int)(size / sizeof(float) / (size_t)r.n_tokens);
    return r;
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
    setenv("WOOLLY_ISA", level, 1);
    woolly_error err = {{0}};
    if (!cpu_runs(level)) { /* not measured here; the level is refused, not silently replaced */
        cr_expect_neq(woolly_isa_init(&err), 0, "WOOLLY_ISA=%s accepted on a CPU without it", level);
        fprintf(stderr, "NMSE phi3-hd96 WOOLLY_ISA=%-6s: this CPU cannot run it, not measured\n", level);
        return;
    }
    cr_assert_eq(woolly_isa_init(&err), 0, "%s", err.msg);
    const enum woolly_isa isa = woolly_isa_active();
    cr_assert_str_eq(woolly_isa_name(isa), level);
    for (int c = 0; c < 3; c++) {
        const enum woolly_type t = c == 0 ? WOOLLY_TYPE_F16 : c == 1 ? WOOLLY_TYPE_F32 : WOOLLY_TYPE_Q8_0;
        expect_tiled_d96(woolly_kernel_choose_attn(t, 96, WOOLLY_ACT_F32), "registry, F32 tiles", isa);
    }

    ref r = hd96_ref();
    woolly_model *m = woolly_model_load(hd96_model(), &err);
    cr_assert(m != NULL, "%s", err.msg);
    cr_assert_eq(m->cfg.head_dim, 96);
    cr_assert_eq(woolly_model_n_vocab(m), r.n_vocab, "vocabulary %d, reference rows of %d", woolly_model_n_vocab(m),
                 r.n_vocab);
    static const woolly_kv_type KV[] = {WOOLLY_KV_F16, WOOLLY_KV_F32, WOOLLY_KV_Q8_0};
    static const char *const KV_NAME[] = {"f16", "f32", "q8_0"};
    static const int BATCHES[] = {512, 1, 7};
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
        for (size_t b = 0; b < sizeof BATCHES / sizeof BATCHES[0]; b++) {
            float *x = api_logits_kv(m, &r, BATCHES[b], 2, r.n_tokens, KV[j]);
            const double e = mean_nmse(x, r.logits, r.n_tokens, r.n_vocab);
            fprintf(stderr, "NMSE phi3-hd96 WOOLLY_ISA=%-6s --kv-type %-4s batch %3d: %.3g (bar %.2g)\n", level,
                    KV_NAME[j], BATCHES[b], e, bar);
            cr_expect_leq(e, bar,
                          "WOOLLY_ISA=%s, %s cache, batch %d: NMSE %.3g exceeds %.2g (if woolly synth's output "
                          "changed, remake the reference: tests/data/hd96/README.md)",
                          level, KV_NAME[j], BATCHES[b], e, bar);
            free(x);
        }
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
