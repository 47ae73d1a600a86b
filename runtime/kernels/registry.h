/* The kernel registry: every kernel and weight layout this build compiled, from the generated X-macro
 * list (generated/kernels.inc), and the choice of one kernel per slot. A matmul slot is (op, weight
 * type, activation format); every slot that has any kernel has a scalar reference kernel on GGUF rows,
 * so a choice never fails for a supported type; faster kernels override it where the CPU supports
 * their ISA level and the features they require.
 *
 * The ISA level (isa.h: the spec's levels) is detected once: the last level of the table that this
 * build compiled and this CPU supports. WOOLLY_ISA=<level> (scalar|avx2|avx512|neon) forces one, and
 * forcing one this build or this CPU lacks is an error, not a silent fallback. WOOLLY_ACT=f32|f16|q8|bf16
 * forces the activation format of every matrix that can take it. */
#ifndef WOOLLY_REGISTRY_H
#define WOOLLY_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "isa.h"
#include "kernels.h"
#include "wtype.h"

/* A weight layout other than GGUF's rows (which is NULL wherever a layout is asked for). */
typedef struct woolly_layout {
    const char *name;       /* e.g. "q4k_r16" */
    enum woolly_type wtype; /* the weight format it holds */
    int rows;               /* rows per interleaved group */
    size_t block_bytes;     /* one weight block of every row of a group */
    woolly_repack_fn repack;
    woolly_unpack_fn unpack;
    enum woolly_layout_kind kind; /* how a block holds its values (kernels.h) */
} woolly_layout;

typedef struct woolly_kernel {
    const char *name; /* e.g. "q4k_f32_gemv_scalar_1x1" */
    enum woolly_op op;
    enum woolly_type wtype; /* weight type (matmul) or cache type (attention); F32 for packers */
    enum woolly_act act;
    enum woolly_isa isa;
    int tile_m, tile_n;          /* register tile: tokens x weight rows; attention: queries x KV positions
                                    per tile (1x1 for the untiled reference); 1x1 for packers */
    int head_dim;                /* attention: the head dimension served, 0 = any */
    const woolly_layout *layout; /* matmul: the weights' layout, NULL for GGUF rows */
    unsigned features;           /* enum woolly_cpu_feature bits it needs beyond its level */
    bool is_default;             /* the spec's portable default of its (weights, ISA) (matmul), of its
                                    (cache, ISA, head dim) (attention); this CPU's is
                                    woolly_kernel_is_default */
    bool is_small_default;       /* matmul GEMM: the spec's default of its (weights, ISA, activations) for
                                    2-16 tokens, where it differs from the GEMM that woolly_kernel_choose
                                    takes (see woolly_kernel_choose_small);
                                    this CPU's is woolly_kernel_is_small_default */
    int min_tokens;              /* matmul GEMM: the fewest tokens it pays from (a decoded panel's fill is
                                    shared by the tokens): a plan that takes it for 17+ runs fewer on its
                                    2-16 step (woolly_matmul_plan_class); 0 for any */
    woolly_matmul_fn matmul;     /* exactly one of these is set */
    woolly_attn_fn attn;
    woolly_pack_fn pack;
    woolly_swiglu_fn swiglu; /* the small ops (op WOOLLY_OP_SWIGLU, WOOLLY_OP_RMSNORM, WOOLLY_OP_GEGLU) */
    woolly_rmsnorm_fn rmsnorm;
    woolly_geglu_fn geglu;
} woolly_kernel;

const char *woolly_act_name(enum woolly_act act);

/* Detects the CPU level and applies WOOLLY_ISA and WOOLLY_ACT, and takes this CPU's defaults. Idempotent;
 * the first call decides. */
int woolly_isa_init(woolly_error *err);
enum woolly_isa woolly_isa_active(void);
/* The activation format WOOLLY_ACT forces, or -1 when it is not set. */
int woolly_act_forced(void);

/* The compiled kernels (any ISA) a tuning profile can name: matmul, attention and packers, what
 * `woolly info --kernels` lists and the registry hash covers. The small ops are registry entries too,
 * chosen like the others (woolly_kernel_choose_ops), but outside this list and its hash: no profile
 * chooses among them. By name: the listed kernels only. And the compiled layouts. */
const woolly_kernel *woolly_kernel_list(int *n);
const woolly_kernel *woolly_kernel_by_name(const char *name);
const woolly_layout *woolly_layout_list(int *n);
const woolly_layout *woolly_layout_by_name(const char *name);

/* The defaults: the spec keeps one portable default per slot; the default profile shipped for this CPU's
 * class (tune/defaults/<class>.profile, built in; class_profile.h), the first whose match line fits the
 * CPU signature, replaces some where they were measured to be slower there. A tuning profile of this
 * machine (`woolly tune`) overrides both. The choices below all take this CPU's defaults. */

/* The class whose shipped profile gives this CPU's defaults, e.g. "zen5", or NULL (the spec's). */
const char *woolly_kernel_defaults_class(void);

/* Whether k is this CPU's default of its slot (its op, weights and ISA; attention: cache, format, ISA and
 * head dimension), and, for a GEMM, its default for 2-16 tokens. */
bool woolly_kernel_is_default(const woolly_kernel *k);
bool woolly_kernel_is_small_default(const woolly_kernel *k);

/* The operand formats of rounded attention tiles in the order this CPU tries them (see
 * woolly_kernel_choose_attn): their count (at most 3), the formats in out. */
int woolly_kernel_attn_rounded_order(enum woolly_act out[3]);

/* What the one-query attention path takes for its L2 prefetch on this CPU (woolly_attn_args'
 * decode_l2_blocks): 0, the kernels' own distance, unless its class's profile says otherwise. */
int32_t woolly_kernel_attn_decode_l2(void);

/* Takes the defaults of the class a CPU with this signature (woolly_cpu_signature's line) belongs to, in
 * place of this CPU's: tests fake a CPU's class this way. 0, or -1 with a message if a shipped profile
 * is malformed (the spec's defaults then stand). */
int woolly_kernel_defaults_for(const char *cpu_signature, woolly_error *err);

/* Takes the defaults of the class profile in text (len bytes; path names it, and its class is the file
 * name's) whatever the CPU: tests give a class rows at any level this way. 0, or -1 with a message (the
 * defaults are then unchanged). */
int woolly_kernel_defaults_from(const char *text, size_t len, const char *path, woolly_error *err);

/* Bytes per row of a k-long row of `type` in a layout (NULL: GGUF's row bytes); 0 if k is not a
 * whole number of blocks. */
size_t woolly_layout_row_bytes(const woolly_layout *l, enum woolly_type type, int64_t k);

/* Whether this CPU, at the active level, can run kernel k. */
bool woolly_kernel_runs(const woolly_kernel *k);

/* The kernel for a slot at the active ISA level whose weights are in `layout` (NULL: GGUF rows): the
 * highest level that is at most the active one, and at that level the default kernel, else the first
 * listed; a level with no default kernel at all (the amx level, whose tile GEMMs are candidates) comes
 * after every level that has one. NULL if no kernel serves it. */
const woolly_kernel *woolly_kernel_choose(enum woolly_op op, enum woolly_type wtype, enum woolly_act act,
                                          const woolly_layout *layout);

/* The GEMM for 2-16 tokens (a server step: one token per active request) of the slot that
 * woolly_kernel_choose(WOOLLY_OP_GEMM, ...) serves: at the level that call picks (or else the nearest
 * one it nests in), the kernel the spec marks `small_default` (a register tile over all the step's
 * tokens), else that call's kernel. */
const woolly_kernel *woolly_kernel_choose_small(enum woolly_type wtype, enum woolly_act act,
                                                const woolly_layout *layout);

/* The default GEMV kernel for weights of `wtype` at the active level: the spec's default at the highest
 * level (at most the active one) that has kernels for these weights. Its activation format and layout
 * are the defaults for such a tensor. With act >= 0, the best GEMV of that same level that takes those
 * activations instead (its layout the default for them), or NULL if that level has none: a forced
 * activation format applies where the level serving the weights has kernels for it. */
const woolly_kernel *woolly_kernel_default_gemv(enum woolly_type wtype, int act);

/* The attention kernel for a cache type and head dimension (kernels serving one head dimension, or any)
 * whose tiles may round their operands (`act` not WOOLLY_ACT_F32, as woolly_attn_act gives it) or not
 * (WOOLLY_ACT_F32). The highest level, and at it the default tile. Rounded, at the level the F32 tiles
 * run at: the first format of woolly_kernel_attn_rounded_order whose tiles run there: BF16 tiles (both
 * products on bfloat16, F32 sums) where a CPU class's profile measured them faster than F32 ones (first
 * there), FP16 P V tiles (WOOLLY_ACT_F16: Q K^T in F32, P V in halves) on a CPU with AVX512-FP16, int16
 * tiles (WOOLLY_ACT_I16: Q K^T and P V on 16-bit integers) at the AVX2 level; else the F32 kernel.
 * Rounding is a step function: a last-bit difference in its input can move an output by a step (1e-5 of
 * it for int16's P weights), which can change a small model's greedy token. So rounded tiles need the
 * same inputs for a prompt's token however the prompt was cut into batches: a lone prompt token takes the
 * tiles (woolly_attn_args.one_query_tiles), and the AVX2 level's int8 matmuls give a token the same bits
 * at any batch size (tests/test_matmul_batch.c). The AVX-512 level's matmuls do not yet
 * (bench/journal/2026-11-27-zen3.md, "Batch-invariant matmuls"). */
const woolly_kernel *woolly_kernel_choose_attn(enum woolly_type cache, int head_dim, enum woolly_act act);

/* The operand format of attention beside matrices whose activation formats are the mask `matmul_acts`
 * (1 << WOOLLY_ACT_*): rounded (WOOLLY_ACT_BF16, which woolly_kernel_choose_attn takes for BF16 or FP16
 * tiles) where some matrix reads int8 or BF16 activations, F32 otherwise. Int8 activations cost a
 * model's logits some 1e-4 of NMSE, BF16 ones about 1e-5 (BF16 weights on a class that gives them BF16
 * activations), and rounded tiles move it by at most about 5e-6; beside F16 or F32 activations (an F16
 * model, strict accuracy) the attention keeps F32 operands. */
enum woolly_act woolly_attn_act(unsigned matmul_acts);

/* The activation packer for a format at the active level (NULL for F32, which needs none). */
const woolly_kernel *woolly_kernel_choose_pack(enum woolly_act act);

/* The kernel of a small op (WOOLLY_OP_SWIGLU, WOOLLY_OP_RMSNORM, WOOLLY_OP_GEGLU): with isa < 0, the highest
 * level at most the active one (every op has a scalar kernel, so never NULL); else the one of level `isa`, if
 * it runs here (NULL if not). */
const woolly_kernel *woolly_kernel_choose_ops(enum woolly_op op, int isa);

/* A hash of the listed kernels (names in order, woolly_kernel_list), for tuning profiles. */
unsigned long long woolly_registry_hash(void);

#endif
