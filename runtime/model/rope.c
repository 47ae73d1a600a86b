/* RoPE's frequencies (rope.h). YaRN as its reference implementation defines it (Peng et al., 2023, and
 * llama.cpp's reading of it): the pair index d at which a pair makes b rotations over the original
 * context L is n_rot ln(L / (2 pi b)) / (2 ln base); below floor(d(beta_fast)) pairs keep their
 * frequency, above ceil(d(beta_slow)) they are divided by the factor, and between the two the mix
 * moves linearly with the pair index. */
#include "rope.h"

#include <math.h>

#include "arch.h"

woolly_rope_setting woolly_rope_global(const woolly_model *m, int32_t n_ctx)
{
    const woolly_config *c = &m->cfg;
    const float *factors = m->w.rope_freqs;
    if (!factors && (m->w.rope_long || m->w.rope_short))
        factors = n_ctx > c->rope_orig_ctx ? m->w.rope_long : m->w.rope_short;
    return (woolly_rope_setting){.n_rot = c->n_rot,
                                 .base = c->rope_base,
                                 .scaling = c->rope_scaling,
                                 .factor = c->rope_scale,
                                 .orig_ctx = c->rope_orig_ctx,
                                 .attn_factor = c->rope_attn_factor,
                                 .freq_factors = factors};
}

woolly_rope_setting woolly_rope_sliding(const woolly_model *m)
{
    const woolly_config *c = &m->cfg;
    return (woolly_rope_setting){.n_rot = c->n_rot,
                                 .base = c->rope_base_swa,
                                 .scaling = WOOLLY_ROPE_SCALING_NONE,
                                 .factor = 1.0,
                                 .orig_ctx = c->rope_orig_ctx,
                                 .attn_factor = c->rope_attn_factor};
}

/* The pair index at which a pair makes `rotations` turns over the original context. */
static double yarn_pair(const woolly_rope_setting *r, double rotations)
{
    return r->n_rot * log(r->orig_ctx / (rotations * 2.0 * M_PI)) / (2.0 * log(r->base));
}

double woolly_rope_inv_freqs(const woolly_rope_setting *r, double *inv_freq)
{
    const int32_t half = r->n_rot / 2;
    const bool yarn = r->scaling == WOOLLY_ROPE_SCALING_YARN;
    const double lo = fmax(0.0, floor(yarn_pair(r, WOOLLY_YARN_BETA_FAST)));
    const double hi = fmin(r->n_rot - 1, ceil(yarn_pair(r, WOOLLY_YARN_BETA_SLOW)));
    for (int32_t i = 0; i < half; i++) {
        double f = pow(r->base, -2.0 * i / r->n_rot);
        if (r->freq_factors)
            f /= (double)r->freq_factors[i];
        if (r->scaling == WOOLLY_ROPE_SCALING_LINEAR) {
            f /= r->factor;
        } else if (yarn) {
            /* extrapolated (1) below lo, interpolated (0) above hi */
            const double keep = 1.0 - fmin(1.0, fmax(0.0, (i - lo) / fmax(0.001, hi - lo)));
            f = f / r->factor * (1.0 - keep) + f * keep;
        }
        inv_freq[i] = f;
    }
    return yarn && r->factor > 1.0 ? (1.0 + 0.1 * log(r->factor)) * r->attn_factor : r->attn_factor;
}
