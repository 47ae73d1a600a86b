/* RoPE's frequencies: what each rotated pair turns by per position, with the scaling the model's
 * hyperparameters name folded in (linear, YaRN; the frequency factor tensors of Llama 3.1 and Phi-3),
 * and the factor RoPE's cos and sin are multiplied by. Computed once per context, in double; the forward
 * pass then only takes cos and sin of position x frequency. */
#ifndef WOOLLY_ROPE_H
#define WOOLLY_ROPE_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

/* YaRN's boundaries in rotations over the original context (llama.cpp's defaults, which the families
 * here do not override): pairs turning more than BETA_FAST times are extrapolated (kept), fewer than
 * BETA_SLOW times interpolated (divided by the factor), a linear ramp between. */
#define WOOLLY_YARN_BETA_FAST 32.0
#define WOOLLY_YARN_BETA_SLOW 1.0

/* One RoPE setting: the base, the scaling and the per-pair divisors (NULL: none) of a kind of layer. */
typedef struct woolly_rope_setting {
    int32_t n_rot;
    double base;
    enum woolly_rope_scaling scaling;
    double factor;             /* rope.scaling.factor */
    int32_t orig_ctx;          /* YaRN's original context length */
    double attn_factor;        /* rope.scaling.attn_factor */
    const float *freq_factors; /* [n_rot / 2] divisors of each pair's frequency, or NULL */
} woolly_rope_setting;

/* The settings of a model's global layers (the scaling, and the factor tensor: rope_freqs, or Phi-3's
 * long or short factors as llama.cpp picks them, by whether a sequence's context n_ctx exceeds the
 * original one) and of its sliding-window layers (their own base, unscaled). */
woolly_rope_setting woolly_rope_global(const woolly_model *m, int32_t n_ctx);
woolly_rope_setting woolly_rope_sliding(const woolly_model *m);

/* inv_freq[i], i < n_rot / 2: theta_i = pos * inv_freq[i]; returns the factor cos and sin are
 * multiplied by (YaRN: (1 + 0.1 ln factor) x attn_factor; else attn_factor). */
double woolly_rope_inv_freqs(const woolly_rope_setting *r, double *inv_freq);

#endif
