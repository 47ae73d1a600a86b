/* RoPE's frequencies (runtime/model/rope.h) against their definitions computed here in double: plain,
 * linear scaling, frequency divisors, and YaRN as its paper and reference implementation define it
 * (Peng et al. 2023, "YaRN: Efficient Context Window Extension of Large Language Models", and
 * github.com/jquesnelle/yarn): with r(d) = L / lambda_d the rotations pair d makes over the original
 * context L, a pair turning more than beta = 32 times keeps its frequency, one turning fewer than
 * alpha = 1 times is divided by the factor s, the pairs between mix the two linearly in the pair index
 * from floor(d(beta)) to ceil(d(alpha)), and cos and sin are multiplied by 0.1 ln s + 1. */
#include <criterion/criterion.h>
#include <math.h>

#include "rope.h"

enum { N_ROT = 128, HALF = N_ROT / 2 };

static double theta(double base, int d)
{
    return pow(base, -2.0 * d / N_ROT);
}

/* The pair index at which a pair makes `rotations` turns over L positions: solving
 * L / (2 pi base^(2d/n)) = rotations for d. */
static double pair_of(double base, double L, double rotations)
{
    return N_ROT * log(L / (2.0 * M_PI * rotations)) / (2.0 * log(base));
}

Test(rope, unscaled_linear_and_divided_frequencies)
{
    double f[HALF];
    woolly_rope_setting r = {
        .n_rot = N_ROT, .base = 10000.0, .factor = 1.0, .orig_ctx = 4096, .attn_factor = 1.0};
    cr_expect_eq(woolly_rope_inv_freqs(&r, f), 1.0);
    for (int d = 0; d < HALF; d++)
        cr_expect_float_eq(f[d], theta(1e4, d), 1e-15 * theta(1e4, d), "pair %d", d);

    r.scaling = WOOLLY_ROPE_SCALING_LINEAR, r.factor = 8.0, r.attn_factor = 1.25;
    cr_expect_eq(woolly_rope_inv_freqs(&r, f), 1.25, "linear: only the attention factor");
    for (int d = 0; d < HALF; d++)
        cr_expect_float_eq(f[d], theta(1e4, d) / 8.0, 1e-15 * theta(1e4, d), "pair %d", d);

    float div[HALF];
    for (int d = 0; d < HALF; d++)
        div[d] = 1.0f + (float)d / 8.0f;
    r.scaling = WOOLLY_ROPE_SCALING_NONE, r.freq_factors = div;
    woolly_rope_inv_freqs(&r, f);
    for (int d = 0; d < HALF; d++)
        cr_expect_float_eq(f[d], theta(1e4, d) / div[d], 1e-15 * theta(1e4, d), "pair %d", d);
}

static void check_yarn(double base, double s, int L, double attn_factor)
{
    double f[HALF];
    const woolly_rope_setting r = {.n_rot = N_ROT,
                                   .base = base,
                                   .scaling = WOOLLY_ROPE_SCALING_YARN,
                                   .factor = s,
                                   .orig_ctx = L,
                                   .attn_factor = attn_factor};
    const double mscale = woolly_rope_inv_freqs(&r, f);
    cr_expect_float_eq(mscale, (0.1 * log(s) + 1.0) * attn_factor, 1e-12, "sqrt(1/t) = 0.1 ln s + 1");
    const double lo = fmax(0.0, floor(pair_of(base, L, 32.0))),
                 hi = fmin(N_ROT - 1, ceil(pair_of(base, L, 1.0)));
    int kept = 0, divided = 0;
    for (int d = 0; d < HALF; d++) {
        const double t = theta(base, d), rotations = L * t / (2.0 * M_PI);
        const double gamma = 1.0 - fmin(1.0, fmax(0.0, (d - lo) / (hi - lo)));
        const double want = (1.0 - gamma) * t / s + gamma * t;
        cr_expect_float_eq(f[d], want, 1e-14 * t, "base %g s %g L %d: pair %d: %.17g, expected %.17g", base,
                           s, L, d, f[d], want);
        if (rotations > 32.0) {
            cr_expect_float_eq(f[d], t, 1e-14 * t, "pair %d turns %g times: extrapolated", d, rotations);
            kept++;
        }
        if (rotations < 1.0) {
            cr_expect_float_eq(f[d], t / s, 1e-14 * t, "pair %d turns %g times: interpolated", d, rotations);
            divided++;
        }
    }
    cr_expect(kept > 0 && divided > 0,
              "base %g L %d: both ends of the ramp are reached (%d kept, %d divided)", base, L, kept,
              divided);
}

Test(rope, yarn_follows_its_definition)
{
    check_yarn(1e6, 4.0, 32768, 1.0); /* Qwen2.5 / Qwen3's long-context setting */
    check_yarn(1e4, 16.0, 4096, 1.0); /* a Llama 2 base stretched 16x */
    check_yarn(5e5, 8.0, 8192, 1.1);  /* rope.scaling.attn_factor multiplies */
}

/* The factor tensors a model's global layers divide by: Llama 3.1's rope_freqs, else Phi-3's long
 * factors when a sequence's context exceeds the original one and its short ones within it (as
 * llama.cpp picks them); the sliding layers' setting has its own base, unscaled, without factors. */
Test(rope, the_factor_tensors_by_the_context_size)
{
    static const float LONG[HALF] = {2.0f}, SHORT[HALF] = {1.5f}, FREQS[HALF] = {3.0f};
    woolly_model m = {.cfg = {.n_rot = N_ROT,
                              .rope_base = 1e4f,
                              .rope_base_swa = 1e3f,
                              .rope_scaling = WOOLLY_ROPE_SCALING_LONGROPE,
                              .rope_scale = 1.0f,
                              .rope_orig_ctx = 4096,
                              .rope_attn_factor = 1.19f}};
    m.w.rope_long = LONG, m.w.rope_short = SHORT;
    cr_expect_eq(woolly_rope_global(&m, 4096).freq_factors, SHORT);
    cr_expect_eq(woolly_rope_global(&m, 4097).freq_factors, LONG);
    double f[HALF];
    woolly_rope_setting r = woolly_rope_global(&m, 8192);
    cr_expect_float_eq(woolly_rope_inv_freqs(&r, f), 1.19, 1e-6, "LongRoPE: the attention factor");
    cr_expect_float_eq(f[0], 0.5, 1e-15);
    const woolly_rope_setting sliding = woolly_rope_sliding(&m);
    cr_expect_eq(sliding.base, 1e3);
    cr_expect_eq(sliding.scaling, WOOLLY_ROPE_SCALING_NONE);
    cr_expect_null(sliding.freq_factors);
    m.w.rope_freqs = FREQS;
    cr_expect_eq(woolly_rope_global(&m, 8192).freq_factors, FREQS, "rope_freqs first");
    m.w.rope_freqs = m.w.rope_long = m.w.rope_short = NULL;
    cr_expect_null(woolly_rope_global(&m, 8192).freq_factors);
}
