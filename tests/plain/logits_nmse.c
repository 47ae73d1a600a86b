/* The model-level check of the plain tests (model_logits.cmake runs `woolly logits`, then this): logits
 * files of a model's reference token sequence against its float64 reference, the mean per-position
 * NMSE of each at most the model's bar for the default dispatch (MODELS in model_logits_check.h, the bar
 * the Criterion tests hold native builds to), its bar with a Q8_0 KV cache after kv=q8_0.
 *
 *   logits_nmse MODEL [kv=f16|f32|q8_0] LOGITS.f32...    MODEL as in the test data, e.g. tiny-llama-q4_k_m;
 *                                                       kv= the run's KV cache type (default f16) */
#include "model_logits_check.h"

Test(model_logits, against_the_reference)
{
    char *const *args = plain_args();
    cr_assert(args[0] && args[1], "usage: logits_nmse MODEL [kv=f16|f32|q8_0] LOGITS.f32...");
    const model_case *mc = NULL;
    for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++)
        if (!strcmp(MODELS[i].name, args[0]))
            mc = &MODELS[i];
    cr_assert(mc != NULL, "%s: no bar for this model in model_logits_check.h", args[0]);
    int f = 1, q8kv = 0;
    if (!strncmp(args[1], "kv=", 3)) {
        cr_assert(!strcmp(args[1], "kv=f16") || !strcmp(args[1], "kv=f32") || !strcmp(args[1], "kv=q8_0"),
                  "%s: expected kv=f16, kv=f32 or kv=q8_0", args[1]);
        q8kv = !strcmp(args[1], "kv=q8_0");
        f++;
    }
    cr_assert(args[f], "usage: logits_nmse MODEL [kv=f16|f32|q8_0] LOGITS.f32...");
    const double bar = q8kv ? mc->max_nmse_q8kv : mc->max_nmse;
    cr_assert(bar > 0, "%s: no bar with a Q8_0 KV cache (its head dimension cannot hold Q8_0 blocks)",
              mc->name);
    ref r = load_ref(mc->name);
    for (; args[f]; f++) {
        size_t size;
        float *x = (float *)tu_read_file(args[f], &size);
        cr_assert_eq(size, (size_t)r.n_tokens * (size_t)r.n_vocab * sizeof(float),
                     "%s: %zu bytes of logits, expected %d x %d floats", args[f], size, r.n_tokens,
                     r.n_vocab);
        const double e = mean_nmse(x, r.logits, r.n_tokens, r.n_vocab);
        printf("NMSE %s %s: %.3g (bar %.2g)\n", mc->name, args[f], e, bar);
        cr_expect_leq(e, bar, "%s: NMSE %.3g exceeds %.2g", args[f], e, bar);
        free(x);
    }
    free_ref(&r);
}
