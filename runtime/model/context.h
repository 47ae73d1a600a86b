/* An evaluation context: the run state of a model (every buffer a forward pass needs, the KV cache, the
 * thread pool and the kernels), allocated once when the context is created. woolly_forward, the forward
 * pass (forward.c), allocates nothing. */
#ifndef WOOLLY_CONTEXT_H
#define WOOLLY_CONTEXT_H

#include "attn_run.h"
#include "error.h"
#include "kv_cache.h"
#include "matmul.h"
#include "model.h"
#include "moe.h"
#include "small_ops.h"
#include "threadpool.h"
#include "woolly.h"

/* Tokens per pass of the feed-forward: its hidden buffers hold this many rows, not a whole batch. 512,
 * the default n_batch, so that a prompt's batch reads the FFN's weights from DRAM once: every pass
 * reads them all, and the GEMMs on decoded panels (matmul/avx512/any_q8_r16_panel.c.j2) fill each panel
 * once per pass, a DRAM read with no work beside it. Against 160 tokens a pass (three passes and a tail
 * for pp512), llama-1b's pp512 on a Zen 5 gained 1-12% (12 pairs in turns over Q4_K_M, Q4_1, Q5_1 and
 * gemma3-1b), the mixtures of experts and the AVX2 level within the noise, for 26 MiB more peak RSS
 * (bench/journal/2026-12-03-zen5-2.md); granite-8b's buffers take 50 MiB, 1% of its weights. 512 is a
 * multiple of 8 (the AVX2 GEMMs' registers of tokens): a pass of 128 ended the AVX2 Q4_K tile of 40
 * tokens with a tile of 8, which decodes each weight once for 8 tokens instead of 40. */
enum { WOOLLY_FFN_TOKENS = 512 };

/* Activations of one batch of up to n_batch tokens ("[n]" below: one row per token of the batch). */
typedef struct woolly_run_state {
    float *x;                   /* [n][n_embd] the residual stream */
    float *xb;                  /* [n][n_embd] normalized input of a sub-block, then its output before the
                                   residual add (each row's input is read before its output is written) */
    float *q;                   /* [n][n_head * head_dim] queries */
    float *k, *v;               /* [n][n_head_kv * head_dim] keys and values of the batch */
    float *att;                 /* [n][n_head * head_dim] attention output, heads concatenated */
    float *att_part;            /* [parts][n_head * head_dim] one token's partial attention outputs */
    float *att_ml;              /* [parts][n_head][2] their running maxima and sums */
    float *hb, *hb2;            /* [min(n, WOOLLY_FFN_TOKENS)][max(n_ff, n_ff_exp)] feed-forward hidden:
                                   gate, up (of the dense FFN or of one expert) */
    float *logits;              /* [n_logits_max][n_vocab] the tokens that asked for logits */
    float *embd;                /* [n][n_embd] final hidden states, normed (woolly_set_embeddings); NULL
                                   until first asked for */
    double *inv_freq;           /* [n_rot / 2] RoPE frequency of each pair (rope.h) */
    float *rope_cos, *rope_sin; /* [n][n_rot / 2] of the batch's positions, times rope_mscale */
    double rope_mscale;         /* the factor RoPE's cos and sin carry (YaRN's attention factor) */
    /* The same for the sliding-window layers, which have a RoPE setting of their own (rope.h); NULL
     * without such layers. */
    double *inv_freq_swa;
    float *rope_cos_swa, *rope_sin_swa;
    double rope_mscale_swa;
    void *pack;     /* packed activations, when a plan packs (non-F32 activations) */
    void *embd_row; /* one token embedding row in GGUF's format, when the matrix is repacked */
    woolly_moe_state moe; /* the mixture of experts' routing and sums (moe.h); empty without experts */
} woolly_run_state;

struct woolly_context {
    woolly_model *model;
    woolly_imatrix *imatrix;      /* the statistics evaluations add to (woolly_context_set_imatrix), or NULL */
    woolly_context_params params; /* resolved: no zeros left */
    woolly_threadpool *pool;
    woolly_kv_cache kv;
    woolly_matmul_plan *plans;        /* by matrix id (model->mats) */
    int32_t n_tuned;                  /* plan steps (matrix x token class) and attention cases (decode,
                                         prefill) the tuning profile set */
    const woolly_kernel *attn;        /* attention of a run of several queries of one sequence (prefill) */
    const woolly_kernel *attn_decode; /* attention of a lone query over its sequence's cache (decode) */
    int32_t attn_q_per_call;          /* queries per kernel call of a run: attn's query tile, or tuned */
    int32_t attn_decode_l2;           /* attn_decode's L2 prefetch (woolly_attn_args.decode_l2_blocks) */
    woolly_small_ops ops;             /* SwiGLU and RMSNorm of the active level */
    int32_t attn_parts;       /* rows of s.att_part: the most KV chunks one token's attention is split into */
    int32_t attn_split;       /* 0: automatic; else the KV chunks per head of every single-token attention
                                 (tests set it, to check the split against the unsplit result) */
    int32_t attn_tuned_split; /* 0: automatic; else the tuning profile's KV chunks per head of one token's
                                 attention (fewer while the cache is short) */
    woolly_run_state s;
    int32_t *seq_len;     /* [n_seq_max] positions filled in each sequence's KV cache */
    int32_t *next_pos;    /* [n_seq_max] scratch of the batch check */
    int32_t *logits_pos;  /* [n_seq_max] the position of the sequence's last token in the last forward
                             pass that had it, when that token's logits were kept; else -1. A lone token
                             right after it was sampled from them: a generated token (woolly_seq_run) */
    woolly_seq_run *runs; /* [n_batch] the runs of the current forward pass */
    woolly_batch own;     /* woolly_eval's batch (sequence 0), cap n_batch */
    int32_t *logits_row;  /* [n_batch] row of s.logits of each token of the last forward pass, or -1 */
    int32_t n_logits_max; /* rows of s.logits: n_batch with logits_all, else n_seq_max */
    int32_t last_n;       /* tokens of the last woolly_eval / woolly_decode call */
    int32_t fwd_first;    /* index in that call of the last forward pass's first token */
    int32_t fwd_n;        /* tokens of the last forward pass; 0: no logits to read */
    bool decode_runs;     /* each token of a batch is a generated run of its own (the decode path):
                             speculative decoding checks guesses with plain decoding's arithmetic */
    const bool *decode_seqs; /* NULL, or [n_seq_max]: as decode_runs for the tokens of these sequences
                                only, the others' runs as usual (the server's batch of prompt chunks and
                                speculated tokens); the caller's array */
    bool embd_on;         /* forward passes keep s.embd */
    bool embd_valid;      /* the last forward pass kept s.embd */
};

/* The context size used when none is given: the trained length, at most 4096 positions, and at most
 * what fits the KV caches of n_seq sequences in a quarter of physical memory. */
enum woolly_type woolly_kv_wtype(woolly_kv_type t);
int32_t woolly_default_n_ctx(const woolly_model *m, woolly_kv_type kv, int32_t n_seq);

/* Internal versions of the public calls, with errors as values. */
woolly_context *woolly_context_create(woolly_model *m, const woolly_context_params *p, woolly_error *err);
int woolly_context_eval(woolly_context *c, const woolly_token *ids, int32_t n, woolly_error *err);
int woolly_context_decode(woolly_context *c, const woolly_batch *b, woolly_error *err);

/* One forward pass over a batch checked by woolly_context_decode's rules (1 .. n_batch tokens, each
 * sequence's tokens continuing its cache in order, at most n_logits_max logits): fills the KV caches,
 * leaves the logits of the tokens that asked in s.logits (logits_row says where), advances the
 * sequences. */
void woolly_forward(woolly_context *c, const woolly_batch *b);

/* Records a failed call's message for woolly_last_error (this thread). */
void woolly_set_last_error(const woolly_error *e);

#endif
