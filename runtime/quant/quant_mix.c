/* Which type each tensor gets in a file type: the Q4_K_M rule of llama.cpp (so that files quantized
 * here are comparable with its files, see docs/BENCHMARK-MODELS.md), and the uniform mixes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quantize.h"

static const struct {
    const char *name;
    enum woolly_ftype ftype;
} FTYPES[] = {
    {"Q4_0", WOOLLY_FTYPE_Q4_0}, {"Q4_1", WOOLLY_FTYPE_Q4_1}, {"Q5_0", WOOLLY_FTYPE_Q5_0},
    {"Q5_1", WOOLLY_FTYPE_Q5_1}, {"IQ4_NL", WOOLLY_FTYPE_IQ4_NL},
    {"F32", WOOLLY_FTYPE_F32},   {"F16", WOOLLY_FTYPE_F16},       {"BF16", WOOLLY_FTYPE_BF16},
    {"Q8_0", WOOLLY_FTYPE_Q8_0},
    {"Q6_K", WOOLLY_FTYPE_Q6_K}, {"Q4_K_M", WOOLLY_FTYPE_Q4_K_M},
    {"Q2_K", WOOLLY_FTYPE_Q2_K}, {"Q3_K_S", WOOLLY_FTYPE_Q3_K_S}, {"Q3_K_M", WOOLLY_FTYPE_Q3_K_M},
    {"Q3_K_L", WOOLLY_FTYPE_Q3_K_L}, {"Q5_K_M", WOOLLY_FTYPE_Q5_K_M}, {"IQ4_XS", WOOLLY_FTYPE_IQ4_XS},
};

int woolly_ftype_from_name(const char *name)
{
    for (size_t i = 0; i < sizeof FTYPES / sizeof FTYPES[0]; i++)
        if (strcmp(FTYPES[i].name, name) == 0)
            return (int)FTYPES[i].ftype;
    return -1;
}

const char *woolly_ftype_name(enum woolly_ftype f)
{
    for (size_t i = 0; i < sizeof FTYPES / sizeof FTYPES[0]; i++)
        if (FTYPES[i].ftype == f)
            return FTYPES[i].name;
    return "?";
}

static bool ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The layer of "blk.<i>.<...>", or -1. */
static int layer_of(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0)
        return -1;
    char *end;
    const long i = strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '.' && i >= 0 && i < 1000000 ? (int)i : -1;
}

/* llama.cpp spends more bits on the first and last eighth of the layers and every third layer in
 * between. */
static bool layer_gets_more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* llama.cpp's choices for the 32-value mixes Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL (llama_tensor_get_type_impl
 * in llama-quant.cpp; with an importance matrix IQ4_NL's ffn_down keeps its type and Q4_0's and Q5_0's
 * first eighth of ffn_down get Q4_1 and Q5_1): the mix's own type but for the output matrix (Q6_K,
 * Q8_0 where its rows are no whole Q6_K blocks), a mixture of 8 experts' attn_k and attn_v (Q8_0), and for
 * IQ4_NL more bits (Q5_K; Q5_1 where the rows are no whole Q5_K blocks, llama.cpp's fallback) on attn_v
 * when 4 or more query heads share a KV head, on the first eighth of the layers' ffn_down, and on a
 * mixture of 8 experts' attn_output. */
static enum woolly_type legacy_mix_type(enum woolly_ftype f, const char *name, uint64_t ne0,
                                        const woolly_mix_model *m)
{
    const enum woolly_type base = f == WOOLLY_FTYPE_Q4_0   ? WOOLLY_TYPE_Q4_0
                                  : f == WOOLLY_FTYPE_Q4_1 ? WOOLLY_TYPE_Q4_1
                                  : f == WOOLLY_FTYPE_Q5_0 ? WOOLLY_TYPE_Q5_0
                                  : f == WOOLLY_FTYPE_Q5_1 ? WOOLLY_TYPE_Q5_1
                                                           : WOOLLY_TYPE_IQ4_NL;
    if (strcmp(name, "output.weight") == 0 || (m->tied_embd && strcmp(name, "token_embd.weight") == 0))
        return ne0 % 256 == 0 ? WOOLLY_TYPE_Q6_K : WOOLLY_TYPE_Q8_0;
    /* a fused attn_qkv counts as an attn_v, a mixture's ffn_down_exps as an ffn_down, as in Q4_K_M */
    const bool attn_v = ends_with(name, "attn_v.weight") || ends_with(name, "attn_qkv.weight");
    if (m->n_expert == 8 && (attn_v || ends_with(name, "attn_k.weight")))
        return WOOLLY_TYPE_Q8_0;
    /* with an importance matrix llama.cpp guards the first eighth of the layers' ffn_down of Q4_0 and
     * Q5_0 with a minimum (Q4_1, Q5_1) */
    if ((f == WOOLLY_FTYPE_Q4_0 || f == WOOLLY_FTYPE_Q5_0) && m->imatrix &&
        (ends_with(name, "ffn_down.weight") || ends_with(name, "ffn_down_exps.weight"))) {
        const int i = layer_of(name);
        if (i >= 0 && i < m->n_layer / 8)
            return f == WOOLLY_FTYPE_Q4_0 ? WOOLLY_TYPE_Q4_1 : WOOLLY_TYPE_Q5_1;
    }
    if (f != WOOLLY_FTYPE_IQ4_NL)
        return base;
    const enum woolly_type more = ne0 % 256 == 0 ? WOOLLY_TYPE_Q5_K : WOOLLY_TYPE_Q5_1;
    const int i = layer_of(name);
    if (attn_v && m->n_gqa >= 4)
        return more;
    if ((ends_with(name, "ffn_down.weight") || ends_with(name, "ffn_down_exps.weight")) && i >= 0 &&
        i < m->n_layer / 8 && !m->imatrix)
        return more;
    if (ends_with(name, "attn_output.weight") && m->n_expert == 8)
        return more;
    return base;
}

static enum woolly_type q4_k_m_type(const char *name, const woolly_mix_model *m)
{
    if (strcmp(name, "output.weight") == 0)
        return WOOLLY_TYPE_Q6_K;
    if (strcmp(name, "token_embd.weight") == 0)
        return m->tied_embd ? WOOLLY_TYPE_Q6_K : WOOLLY_TYPE_Q4_K;
    /* 8 experts (Mixtral's shape): attention is a small part of the file beside the experts, and llama.cpp
     * spends more bits on it */
    if (m->n_expert == 8) {
        if (ends_with(name, "attn_k.weight") || ends_with(name, "attn_v.weight"))
            return WOOLLY_TYPE_Q8_0;
        if (ends_with(name, "attn_output.weight"))
            return WOOLLY_TYPE_Q5_K;
    }
    /* a fused attn_qkv counts as an attn_v (phi3), a mixture's ffn_down_exps as an ffn_down */
    if (ends_with(name, "attn_v.weight") || ends_with(name, "attn_qkv.weight") ||
        ends_with(name, "ffn_down.weight") || ends_with(name, "ffn_down_exps.weight")) {
        const int i = layer_of(name);
        if (i >= 0 && layer_gets_more_bits(i, m->n_layer))
            return WOOLLY_TYPE_Q6_K;
    }
    return WOOLLY_TYPE_Q4_K;
}

/* llama.cpp's choices for Q2_K, Q3_K_S/M/L, Q5_K_M and IQ4_XS (llama_tensor_get_type_impl in
 * llama-quant.cpp; with an importance matrix IQ4_XS's first eighth of ffn_down keeps its type), for the
 * tensors of the architectures here: the mix's own type, more bits where the error costs most (the output
 * matrix, attn_v, ffn_down, attn_output). */
static enum woolly_type low_bit_mix_type(enum woolly_ftype f, const char *name, const woolly_mix_model *m)
{
    const enum woolly_type base = f == WOOLLY_FTYPE_Q2_K     ? WOOLLY_TYPE_Q2_K
                                  : f == WOOLLY_FTYPE_IQ4_XS ? WOOLLY_TYPE_IQ4_XS
                                  : f == WOOLLY_FTYPE_Q5_K_M ? WOOLLY_TYPE_Q5_K
                                                             : WOOLLY_TYPE_Q3_K;
    if (strcmp(name, "output.weight") == 0 || (m->tied_embd && strcmp(name, "token_embd.weight") == 0))
        return WOOLLY_TYPE_Q6_K;
    const int i = layer_of(name), n = m->n_layer;
    /* a fused attn_qkv counts as an attn_v, a mixture's ffn_down_exps as an ffn_down, as in Q4_K_M */
    if (ends_with(name, "attn_v.weight") || ends_with(name, "attn_qkv.weight")) {
        if (m->n_expert == 8)
            return WOOLLY_TYPE_Q8_0;
        switch (f) {
        case WOOLLY_FTYPE_Q2_K:
            return m->n_gqa >= 4 ? WOOLLY_TYPE_Q4_K : WOOLLY_TYPE_Q3_K;
        case WOOLLY_FTYPE_Q3_K_M:
            return i >= 0 && i < 2 ? WOOLLY_TYPE_Q5_K : WOOLLY_TYPE_Q4_K;
        case WOOLLY_FTYPE_Q3_K_L:
            return WOOLLY_TYPE_Q5_K;
        case WOOLLY_FTYPE_IQ4_XS:
            return m->n_gqa >= 4 ? WOOLLY_TYPE_Q5_K : base;
        case WOOLLY_FTYPE_Q5_K_M:
            return i >= 0 && layer_gets_more_bits(i, n) ? WOOLLY_TYPE_Q6_K : base;
        default:
            return base;
        }
    }
    if (ends_with(name, "attn_k.weight") && m->n_expert == 8)
        return WOOLLY_TYPE_Q8_0;
    if (ends_with(name, "ffn_down.weight") || ends_with(name, "ffn_down_exps.weight")) {
        switch (f) {
        case WOOLLY_FTYPE_Q2_K:
            return WOOLLY_TYPE_Q3_K;
        case WOOLLY_FTYPE_Q3_K_M:
            return i >= 0 && i < n / 16 ? WOOLLY_TYPE_Q5_K : WOOLLY_TYPE_Q4_K;
        case WOOLLY_FTYPE_Q3_K_L:
            return WOOLLY_TYPE_Q5_K;
        case WOOLLY_FTYPE_IQ4_XS:
            return i >= 0 && i < n / 8 && !m->imatrix ? WOOLLY_TYPE_Q5_K : base;
        case WOOLLY_FTYPE_Q5_K_M:
            return i >= 0 && layer_gets_more_bits(i, n) ? WOOLLY_TYPE_Q6_K : base;
        default:
            return base;
        }
    }
    if (ends_with(name, "attn_output.weight")) {
        if (m->n_expert == 8)
            return f == WOOLLY_FTYPE_Q2_K || f == WOOLLY_FTYPE_Q3_K_S || f == WOOLLY_FTYPE_Q3_K_M ||
                           f == WOOLLY_FTYPE_IQ4_XS
                       ? WOOLLY_TYPE_Q5_K
                       : base;
        if (f == WOOLLY_FTYPE_Q2_K)
            return WOOLLY_TYPE_Q3_K;
        if (f == WOOLLY_FTYPE_Q3_K_M)
            return WOOLLY_TYPE_Q4_K;
        if (f == WOOLLY_FTYPE_Q3_K_L)
            return WOOLLY_TYPE_Q5_K;
    }
    return base;
}

/* The type of 32-value blocks a 256-value type falls back to where the rows are no whole super-blocks
 * (Gemma 3's 1152, for one): llama.cpp's table (tensor_type_fallback in llama-quant.cpp), the nearest
 * size at or above the type's, so that a file is what llama-quantize writes. */
static enum woolly_type fallback_of(enum woolly_type t)
{
    switch (t) {
    case WOOLLY_TYPE_IQ4_XS:
        return WOOLLY_TYPE_IQ4_NL;
    case WOOLLY_TYPE_Q2_K:
    case WOOLLY_TYPE_Q3_K:
        return WOOLLY_TYPE_Q4_0;
    case WOOLLY_TYPE_Q4_K:
        return WOOLLY_TYPE_Q5_0;
    case WOOLLY_TYPE_Q5_K:
        return WOOLLY_TYPE_Q5_1;
    default: /* Q6_K, and the 32-value types themselves (rows that 32 does not divide then: F16) */
        return WOOLLY_TYPE_Q8_0;
    }
}

enum woolly_type woolly_mix_type(enum woolly_ftype f, const char *name, uint32_t n_dims, const uint64_t *ne,
                                 const woolly_mix_model *m, char *note, size_t note_size)
{
    if (note && note_size)
        note[0] = '\0';
    /* a mixture's router stays F32 in every file type, as llama.cpp leaves it: small, and a rounded
     * logit could change which experts a token takes */
    if (n_dims < 2 || ends_with(name, "ffn_gate_inp.weight"))
        return WOOLLY_TYPE_F32;
    enum woolly_type want;
    switch (f) {
    case WOOLLY_FTYPE_Q4_0:
    case WOOLLY_FTYPE_Q4_1:
    case WOOLLY_FTYPE_Q5_0:
    case WOOLLY_FTYPE_Q5_1:
    case WOOLLY_FTYPE_IQ4_NL:
        want = legacy_mix_type(f, name, ne[0], m);
        break;
    case WOOLLY_FTYPE_F32:
        want = WOOLLY_TYPE_F32;
        break;
    case WOOLLY_FTYPE_F16:
        want = WOOLLY_TYPE_F16;
        break;
    case WOOLLY_FTYPE_BF16:
        want = WOOLLY_TYPE_BF16;
        break;
    case WOOLLY_FTYPE_Q8_0:
        want = WOOLLY_TYPE_Q8_0;
        break;
    case WOOLLY_FTYPE_Q6_K:
        want = WOOLLY_TYPE_Q6_K;
        break;
    case WOOLLY_FTYPE_Q4_K_M:
        want = q4_k_m_type(name, m);
        break;
    case WOOLLY_FTYPE_Q2_K:
    case WOOLLY_FTYPE_Q3_K_S:
    case WOOLLY_FTYPE_Q3_K_M:
    case WOOLLY_FTYPE_Q3_K_L:
    case WOOLLY_FTYPE_Q5_K_M:
    case WOOLLY_FTYPE_IQ4_XS:
        want = low_bit_mix_type(f, name, m);
        break;
    default:
        want = WOOLLY_TYPE_F16;
        break;
    }
    if (woolly_row_bytes(want, (int64_t)ne[0]) > 0)
        return want;
    enum woolly_type fallback = fallback_of(want);
    if (woolly_row_bytes(fallback, (int64_t)ne[0]) <= 0) /* rows that are no whole block of 32 either */
        fallback = WOOLLY_TYPE_F16;
    if (note && note_size)
        snprintf(note, note_size, "row length %llu is not a multiple of %u: %s instead of %s",
                 (unsigned long long)ne[0], woolly_type_get(want)->block_elems,
                 woolly_type_get(fallback)->name, woolly_type_get(want)->name);
    return fallback;
}
