/* The autotuner: measures the registry's kernels and the runtime's blocking on the matrix shapes a model
 * needs, on this machine, and fills a tuning profile (runtime/model/profile.h) with the winners.
 *
 * What is tuned, per weight type and shape:
 *   - the weight layout, once per shape (a tensor is repacked at most once): the layout whose best
 *     kernels make the model's batch mix fastest (tokens per class x time per token, summed over the
 *     classes the model runs the shape with);
 *   - per batch-size class (1 token, 2-16, 17+) and thread count: the kernel among those on that layout
 *     (register tile, activation format), then its step's blocking (threads, rows, columns and tokens
 *     per call, prefetch), one parameter at a time from cache-sized candidates.
 * The defaults (what runs without a profile) are always measured first and stay unless something beats
 * them by more than the noise margin; at the end, every case where the choice differs is measured again
 * beside its default, and a choice that does not hold up is dropped for the default. Under strict
 * accuracy only F16/F32 activation kernels are candidates (the default may then be out of reach).
 *
 * Attention (tune_attn.c), for the KV cache type asked for and the model's head dimension: the kernels of
 * the default's ISA level (their tiles: queries x KV positions) for one token over a long cache
 * (decode), each with the KV split the runtime would pick, then the best one's split; and for a block of
 * causal queries (prefill), then the best one's queries per call. The defaults first, a last check
 * beside them, as for the matrices.
 *
 * Timing is tune/timing.c's: warm-up, calls grown to a minimum sample time, the median of several
 * samples, a cap. The weights rotate over enough copies that a call reads them from where a real run
 * would (from DRAM when the model's matrices exceed the caches). The whole run fits a time budget:
 * each measurement gets the remaining budget divided by the measurements left. */
#ifndef WOOLLY_TUNE_H
#define WOOLLY_TUNE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "profile.h"

/* One weight type and shape of a model's matrices. */
typedef struct woolly_tune_shape {
    enum woolly_type type;
    int64_t rows, cols;
    int n_tensors;                       /* the model's matrices of this type and shape */
    bool classes[WOOLLY_TOKENS_CLASSES]; /* the batch-size classes the model runs them with */
    char example[64];                    /* one of their names */
} woolly_tune_shape;

typedef struct woolly_tune_model {
    char name[128];
    woolly_tune_shape *shapes;
    int n_shapes;
    double matrix_bytes; /* of all its matrices: what one decoded token streams */
    /* Its attention (0: not known, attention is not tuned): layers, query and KV heads, head dimension,
     * trained context length. */
    int32_t n_layer, n_head, n_head_kv, head_dim, n_ctx;
} woolly_tune_model;

/* The shapes of a GGUF model's matrices, from its tensor table, and its attention's dimensions, from its
 * hyperparameters as the runtime reads them (nothing is loaded). Which tensors are matrices, and the
 * batch classes each runs with, come from its architecture's table (runtime/model/arch.h): the output
 * matrix (output.weight, or the token embedding when tied) runs for one token (a prompt's logits are
 * the last token's) or a small batch (one token of each of the few sequences a server decodes
 * together), never a large one. */
int woolly_tune_model_from_gguf(const char *path, woolly_tune_model *m, woolly_error *err);
/* The same for a `woolly synth` preset, without writing it. */
int woolly_tune_model_from_preset(const char *preset, woolly_tune_model *m, woolly_error *err);
void woolly_tune_model_free(woolly_tune_model *m);

/* Tokens per call at which each class is measured. */
extern const int WOOLLY_TUNE_TOKENS[WOOLLY_TOKENS_CLASSES];

typedef struct woolly_tune_opts {
    int threads;                        /* the thread count tuned for (the rows' `threads`) */
    double budget_s;                    /* wall time for the whole run */
    bool strict;                        /* F16/F32 activations only */
    int32_t mix[WOOLLY_TOKENS_CLASSES]; /* tokens per class of the model's batch mix */
    enum woolly_type kv_cache;          /* the KV cache type attention is tuned for (F16, F32, Q8_0) */
    /* Called after each measurement: the share of the work done and what was measured. May be NULL. */
    void (*progress)(void *ctx, double done, const char *what);
    void *progress_ctx;
} woolly_tune_opts;

/* The default budget for a model: about 3 minutes for granite-8b's 4.6 GiB of matrices, less for
 * smaller ones, at least 20 s. */
double woolly_tune_default_budget(const woolly_tune_model *m);

/* One tuned case (shape, class): the default and the choice, each with its measured time per call. */
typedef struct woolly_tune_case {
    int shape;
    enum woolly_tokens_class cls;
    woolly_matmul_step def, chosen;
    double def_us, chosen_us;
    bool def_allowed; /* false under strict accuracy when the default reads int8 */
    bool verified;    /* measured again beside the default at the end */
    bool reverted;    /* the choice did not hold up: the default is kept */
} woolly_tune_case;

/* One tuned attention case (decode or prefill): the default and the choice, each with its time per
 * layer. */
typedef struct woolly_tune_attn_case {
    woolly_profile_attn def, chosen; /* us: the final measurements */
    bool verified, reverted;
    bool unchecked; /* the budget ran out before the choice was checked: the default is kept */
} woolly_tune_attn_case;

typedef struct woolly_tune_layout_choice {
    int shape;
    const woolly_layout *def, *chosen;
    double def_cost_us,
        chosen_cost_us; /* the batch mix's time per model pass (sum of tokens x time per token) */
} woolly_tune_layout_choice;

typedef struct woolly_tune_result {
    woolly_profile *profile;
    woolly_tune_case *cases;
    int n_cases;
    woolly_tune_layout_choice *layouts;
    int n_layouts;
    woolly_tune_attn_case attn[WOOLLY_ATTN_PHASES];
    int n_attn;             /* 0 when attention was not tuned (see attn_skipped) */
    char attn_skipped[160]; /* why not, if it was not */
    int measurements;
    double elapsed_s;
    int shapes_skipped; /* left to the defaults when the budget ran out */
} woolly_tune_result;

/* Tunes every shape of m. Fills r (free with woolly_tune_result_free). */
int woolly_tune_run(const woolly_tune_model *m, const woolly_tune_opts *o, woolly_tune_result *r,
                    woolly_error *err);
void woolly_tune_result_free(woolly_tune_result *r);

/* Writes a profile as text, and saves it to a file (its folder created if missing; written to a
 * temporary file and renamed, so that a reader never sees half a profile). */
int woolly_profile_write(const woolly_profile *p, FILE *f);
int woolly_profile_save(const woolly_profile *p, const char *path, woolly_error *err);

#endif
