/* BF16 weights end to end: tiny-llama-f16 converted by `woolly quantize ... BF16`, its logits at every
 * ISA level this CPU runs (amx included: on a CPU class whose shipped profile gives BF16 weights BF16
 * activations, prompts take the AMX BF16 tiles there), in batches of 512 (the GEMM), 1 (decode) and 7,
 * against the float64 reference of the F16 file.
 *
 * The bar is what the conversion itself costs plus the activations' rounding, with room: the float64
 * logits of the BF16 file are 1.81e-5 from the F16 file's (each weight rounded to 8 significant bits);
 * the F32-activation kernels add nothing visible to that (1.82e-5), BF16 activations (the avx512 and amx
 * kernels of such a class; llama.cpp takes BF16 weights' activations so) about 1.1e-5 more, and the
 * rounded attention tiles that come with them a little (on an Intel Xeon with AMX, 2026-12-01: 2.61e-5
 * with the avx512 level's FP16 P V tiles, 2.58-2.94e-5 with the amx level's BF16 tiles; on the Zen 5,
 * whose class profile takes them too, with its BF16 attention tiles, 2026-12-06: 2.59e-5 decoding,
 * 2.92-2.95e-5 in batches). Bar: 4e-5, 1.5x the 2.6e-5 most of them land on. */
#include "model_logits_check.h"

#define BF16_MAX_NMSE 4e-5

Test(logits_bf16, tiny_llama_in_bf16_at_every_level)
{
    char model[4096], args[8192];
    snprintf(model, sizeof model, "%s", tu_tmp_path("tiny-llama-bf16.gguf"));
    snprintf(args, sizeof args, "quantize -q %s %s BF16", model_path("tiny-llama-f16"), model);
    char *err;
    cr_assert_eq(tu_run_cli(args, NULL, &err), 0, "woolly %s failed: %s", args, err);
    free(err);
    ref r = load_ref("tiny-llama-f16");
    const woolly_cpu *c = woolly_cpu_get();
    static const char *const LEVELS[] = {"scalar", "avx2", "avx512", "amx"};
    static const int BATCHES[] = {512, 1, 7};
    int measured = 0;
    for (size_t i = 0; i < sizeof LEVELS / sizeof LEVELS[0]; i++) {
        const bool runs = !strcmp(LEVELS[i], "amx") ? cpu_runs("avx512") && c->amx_tile && c->amx_int8
                                                     : cpu_runs(LEVELS[i]);
        if (!runs) {
            fprintf(stderr, "NMSE tiny-llama-bf16 WOOLLY_ISA=%s: this CPU cannot run it, not measured\n", LEVELS[i]);
            continue;
        }
        for (size_t b = 0; b < sizeof BATCHES / sizeof BATCHES[0]; b++) {
            float *x = cli_logits_of(model, &r, LEVELS[i], "--tune-profile none", BATCHES[b], 2, NULL);
            const double e = mean_nmse(x, r.logits, r.n_tokens, r.n_vocab);
            fprintf(stderr, "NMSE tiny-llama-bf16 WOOLLY_ISA=%-6s batch %3d (woolly logits): %.3g (bar %.2g)\n",
                    LEVELS[i], BATCHES[b], e, BF16_MAX_NMSE);
            cr_expect_leq(e, BF16_MAX_NMSE, "WOOLLY_ISA=%s batch %d: NMSE %.3g exceeds %.2g", LEVELS[i],
                          BATCHES[b], e, BF16_MAX_NMSE);
            free(x);
            measured++;
        }
    }
    cr_expect_geq(measured, 3, "not even the scalar level measured");
    free_ref(&r);
    remove(model);
}
