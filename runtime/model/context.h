/* An evaluation context: the run state of a model (every buffer a forward pass needs, the KV cache, the
 * thread pool and the kernels), allocated once when the context is created. woolly_forward, the forward
 * pass (forward.c), allocates nothing. */
#ifndef WOOLLY_CONTEXT_H
#define WOOLLY_CONTEXT_H

#include "error.h"
#include "kv_cache.h"
#include "matmul.h"
#include "model.h"
#include "small_ops.h"
#include "threadpool.h"
#include "woolly.h"

/* Activations of one batch of up to n_batch tokens ("[n]" below: one row per token of the batch). */
typedef struct woolly_run_state {
    float *x;                   /* [n][n_embd] the residual stream */
    float *xb;                  /* [n][n_embd] normalized input of a sub-block */
    float *xb2;                 /* [n][n_embd] output of a sub-block, before the residual add */
    float *q;                   /* [n][n_head * head_dim] queries */
    float *k, *v;               /* [n][n_head_kv * head_dim] keys and values of the batch */
    float *att;                 /* [n][n_head * head_dim] attention output, heads concatenated */
    float *att_part;            /* [parts][n_head * head_dim] one token's partial attention outputs */
    float *att_ml;              /* [parts][n_head][2] their running maxima and sums */
    float *hb, *hb2;            /* [n][n_ff] feed-forward hidden: gate, up */
    float *logits;              /* [logits_all ? n : 1][n_vocab] */
    double *inv_freq;           /* [n_rot / 2] RoPE frequency of each pair */
    float *rope_cos, *rope_sin; /* [n][n_rot / 2] of the batch's positions */
    void *pack;                 /* packed activations, when a plan packs (non-F32 activations) */
    void *embd_row;             /* one token embedding row in GGUF's format, when the matrix is repacked */
} woolly_run_state;

struct woolly_context {
    woolly_model *model;
    woolly_context_params params; /* resolved: no zeros left */
    woolly_threadpool *pool;
    woolly_kv_cache kv;
    woolly_matmul_plan *plans; /* by matrix id (model->mats) */
    int32_t n_tuned;           /* plan steps (matrix x token class) the tuning profile set */
    const woolly_kernel *attn;
    woolly_small_ops ops; /* SwiGLU and RMSNorm of the active level */
    int32_t attn_parts;   /* rows of s.att_part: the most KV chunks one token's attention is split into */
    int32_t attn_split;   /* 0: automatic; else the KV chunks per head of every single-token attention
                             (tests set it, to check the split against the unsplit result) */
    woolly_run_state s;
    int32_t n_past;   /* positions filled in the KV cache */
    int32_t n_logits; /* rows of s.logits valid after the last eval */
    int32_t last_n;   /* tokens of the last eval */
};

/* The context size used when none is given: the trained length, at most 4096 positions, and at most
 * what fits a KV cache in a quarter of physical memory. */
enum woolly_type woolly_kv_wtype(woolly_kv_type t);
int32_t woolly_default_n_ctx(const woolly_model *m, woolly_kv_type kv);

/* Internal versions of the public calls, with errors as values. */
woolly_context *woolly_context_create(woolly_model *m, const woolly_context_params *p, woolly_error *err);
int woolly_context_eval(woolly_context *c, const woolly_token *ids, int32_t n, woolly_error *err);

/* One forward pass over n <= n_batch tokens at positions n_past .. n_past + n - 1 (checked by the
 * caller): fills the KV cache, leaves the logits in s.logits, advances n_past. */
void woolly_forward(woolly_context *c, const woolly_token *ids, int32_t n);

/* Records a failed call's message for woolly_last_error (this thread). */
void woolly_set_last_error(const woolly_error *e);

#endif
