/* A mixture-of-experts feed-forward (moe.c): the router, each token's top-k experts, and each chosen
 * expert's SwiGLU over the tokens routed to it, their outputs summed with the routing weights. */
#ifndef WOOLLY_MOE_H
#define WOOLLY_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "model.h"

struct woolly_context;

/* One product of a step that runs several experts' matrices in one dispatch: the matrix and its output,
 * the tokens it takes and their packed input, and its rows as tiles of the kernel's width, numbered on
 * from the previous unit's. */
typedef struct woolly_moe_unit {
    struct woolly_matmul_out o;
    int64_t m;
    const void *xk;
    int64_t align, n_tiles, tile0;
} woolly_moe_unit;

/* A context's buffers for the step (allocated once with the context; all NULL for a dense model).
 * "[n]": one row per token of a batch of up to n_batch; "[slice]": of a grouped step's tokens (a batch
 * takes steps of up to `slice` tokens); "chosen": the most experts one step of the one-step paths
 * chooses (the k of each of its tokens, at most n_expert). */
typedef struct woolly_moe_state {
    float *logits;   /* [n][n_expert] the router's logits */
    int32_t *chosen; /* [n][k] each token's experts, the most probable first */
    float *weight;   /* [n][k] their weights, summing to 1 */
    int32_t *start;  /* [n_expert + 1] where each expert's pairs begin in token/pair_w */
    int32_t *token;  /* [n * k] the (token, expert) pairs grouped by expert, tokens in batch order */
    float *pair_w;   /* [n * k] the pair's weight */
    int32_t *pair_at; /* [n][k] each token's places in that order, ascending */
    float *in;       /* [WOOLLY_FFN_TOKENS][n_embd] an expert's tokens' inputs, gathered */
    float *out;      /* [WOOLLY_FFN_TOKENS][n_embd] its outputs for them */
    float *sum;      /* [n][n_embd] the weighted sum of each token's experts */
    /* Decoding one token (all k experts in one step), or a batch (all their experts in a step per
     * slice of `slice` tokens): */
    int32_t slice;                  /* the most tokens one step takes (its pairs fill the buffers below) */
    int32_t *one_e;                 /* [k] its experts in index order */
    float *one_w;                   /* [k] their weights */
    struct woolly_matmul_out *outs; /* [3 chosen] gate and up of each chosen expert, then down of each */
    struct woolly_moe_expert_rows *rows; /* [chosen] the chunks of each still to claim (moe.c) */
    int32_t *row0;                  /* [chosen + 1] where each chosen expert's rows begin in gate, up, down */
    woolly_moe_unit *units;         /* [2 chosen] a batch's products (the two-dispatch form) */
    float *gate, *up;               /* [pairs][n_ff_exp], pairs = k times the slice's tokens */
    float *down;                    /* [pairs][n_embd] each pair's expert output */
    void *pack;                     /* [pairs] packed inputs (F32 is the widest format) */
    void *pack_down;                /* [pairs] down's packed inputs, when packed beside gate's and up's */
    void *pack_tokens;              /* [slice] the slice's token inputs packed once for all their experts */
} woolly_moe_state;

int woolly_moe_state_alloc(woolly_moe_state *s, const woolly_config *p, size_t n_batch, size_t n_ffn,
                           woolly_error *err);
void woolly_moe_state_free(woolly_moe_state *s);

/* Each token's experts and weights from its router logits (n_expert of them): softmax over all experts,
 * the k most probable (a tie goes to the lower index), their probabilities renormalized to sum 1. */
void woolly_moe_route(const float *logits, int32_t n_expert, int32_t k, int32_t *chosen, float *weight);

/* The FFN of layer L on the n normalized rows of c->s.xb: the mixture's output replaces them (the
 * caller adds it to the residual stream). */
void woolly_moe_ffn(struct woolly_context *c, const woolly_layer *L, int32_t n);

/* For tests: false sends a lone token's experts, and a batch's experts, down the general path (one
 * matmul per expert, then the weighted sum), so that the one-step paths can be compared with it; true,
 * the default, the one step. Set it only while no forward pass runs. */
void woolly_moe_set_one_step(bool on);

/* For tests: false keeps a lone token's experts, and a batch's, on the two dispatches that split
 * their rows, even where the threads would take the experts whole (true, the default), so that both
 * can be compared with the general path. Set it only while no forward pass runs. */
void woolly_moe_set_whole_experts(bool on);

/* For tests: a batch's steps take at most this many tokens (0, the default: as many as the buffers
 * hold, hundreds), so that a short prompt runs in several slices. Set it only while no forward pass
 * runs. */
void woolly_moe_set_slice_cap(int32_t tokens);

#endif
