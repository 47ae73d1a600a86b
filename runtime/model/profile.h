/* Tuning profiles: what `woolly tune` measured to be fastest on this machine, read back by every run as
 * data (libwoolly never measures; see FFTW's wisdom). A profile is a small text file:
 *
 *   woolly-tune-profile 1                         format version
 *   woolly 0.1.0                                  the Woolly version that wrote it
 *   cpu x86_64 AuthenticAMD family 26 ...         the CPU signature (cpu.h) it was measured on
 *   registry 5f0d3c1e9a7b2c44                     the kernel registry hash of the build
 *   isa avx512                                    the ISA level active while measuring
 *   accuracy default                              or strict: F16/F32 activations only
 *   mix 128,0,512                                 tokens per class (1, 2-16, 17+) the layouts are weighed for
 *   # comment lines start with '#'
 *   layout Q4_K 4096x4096 q4k_r16                 the weight layout of every matrix of that type and shape
 *   matmul Q4_K 4096x4096 tokens=1 threads=2 kernel=q4k_q8_gemv_avx512_r16_1x16 rows_per_call=64
 *          tokens_per_call=0 k_per_call=0 prefetch=1024 split=0 us=812.3 default=q4k_q8_gemv_avx512_r16_1x16
 *          default_us=850.1                       (one line) the step (matmul.h) for a class of batch sizes
 *                                                 and a thread count, and its time per call beside the
 *                                                 default's
 *   attn F16 d64 decode threads=2 kernel=attn_f16_flash_avx512_d64_b8x64 queries_per_call=1 kv_split=2
 *          queries=1 positions=4096 us=310.2 default=attn_f16_flash_avx512_d64_b16x64 default_us=330.5
 *   attn F16 d64 prefill threads=2 kernel=attn_f16_flash_avx512_d64_b16x64 queries_per_call=32 kv_split=1
 *          queries=512 positions=512 us=9120.0 default=attn_f16_flash_avx512_d64_b16x64 default_us=9400.2
 *                                                 (one line each) attention for a KV cache type and head
 *                                                 dimension and a thread count: the kernel (its tile is
 *                                                 the query block x KV block, `_b16x64`) for one token
 *                                                 over the cache (decode) and for a block of causal
 *                                                 queries (prefill); the queries per kernel call of a
 *                                                 batch (prefill); the KV chunks one token's cache is
 *                                                 split into across the threads (decode; 1 for
 *                                                 prefill); what it was measured at (queries, cache
 *                                                 positions, one layer's heads) and its time beside the
 *                                                 default's
 *   end 4                                         the number of layout, matmul and attn rows: a cut file
 *                                                 fails
 *
 * Kernels are named by name. The header must match this process exactly (format, version, CPU
 * signature, registry hash, ISA level); every row must parse, name kernels this build has and this CPU
 * runs, fit its matrix (woolly_matmul_step_check) or cache and head dimension, and be the only row of
 * its key; a matmul row needs the layout row of its shape before it. Anything else rejects the whole
 * profile: it is used whole or not at all. The lines are read by the reader the default profiles shipped
 * per CPU class share (profile_text.h; kernels/class_profile.h): a tuning profile's rows override those
 * defaults, which the `default=` kernels are (the spec's where this CPU's class names none).
 *
 * Format 2 added the attn rows (format 1 had none; a format-1 profile is rejected: tune again). */
#ifndef WOOLLY_PROFILE_H
#define WOOLLY_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "matmul.h"
#include "registry.h"

#define WOOLLY_PROFILE_MAGIC "woolly-tune-profile"
#define WOOLLY_PROFILE_FORMAT 2
#define WOOLLY_PROFILE_MAX_BYTES (4 << 20)

typedef struct woolly_profile_layout {
    enum woolly_type type;
    int64_t rows, cols;
    const woolly_layout *layout; /* NULL: GGUF rows */
} woolly_profile_layout;

typedef struct woolly_profile_matmul {
    enum woolly_type type;
    int64_t rows, cols;
    enum woolly_tokens_class cls;
    int32_t threads; /* the context's thread count it applies to */
    woolly_matmul_step step;
    double us;                           /* measured, microseconds per call */
    const woolly_kernel *default_kernel; /* what runs here without a profile, and its time */
    double default_us;
} woolly_profile_matmul;

/* Attention's two cases: one token over the cache, a block of causal queries. */
enum woolly_attn_phase { WOOLLY_ATTN_DECODE = 0, WOOLLY_ATTN_PREFILL = 1, WOOLLY_ATTN_PHASES };
const char *woolly_attn_phase_name(enum woolly_attn_phase ph); /* "decode", "prefill" */

/* Bounds of the attn rows' numbers. */
#define WOOLLY_PROFILE_MAX_QUERIES_PER_CALL 4096
#define WOOLLY_PROFILE_MAX_POSITIONS (1 << 24)

typedef struct woolly_profile_attn {
    enum woolly_type cache; /* F16, F32 or Q8_0 */
    int32_t head_dim;
    enum woolly_attn_phase phase;
    int32_t threads;                     /* the context's thread count it applies to */
    const woolly_kernel *kernel;         /* an attention kernel for this cache and head dimension */
    int32_t queries_per_call;            /* prefill: queries per kernel call (work item); decode: 1 */
    int32_t kv_split;                    /* decode: KV chunks of one token's cache; prefill: 1 */
    int32_t queries, positions;          /* measured at: queries of one sequence, ending at this cache size */
    double us;                           /* measured, microseconds per layer */
    const woolly_kernel *default_kernel; /* what runs here without a profile, and its time */
    double default_us;
} woolly_profile_attn;

typedef struct woolly_profile {
    char path[1024]; /* where it was read from ("" if not from a file) */
    enum woolly_isa isa;
    bool strict;                        /* F16/F32 activations only */
    int32_t mix[WOOLLY_TOKENS_CLASSES]; /* tokens per class the layouts were chosen for */
    woolly_profile_layout *layouts;
    int32_t n_layouts, cap_layouts;
    woolly_profile_matmul *matmuls;
    int32_t n_matmuls, cap_matmuls;
    woolly_profile_attn *attns;
    int32_t n_attns, cap_attns;
} woolly_profile;

/* An empty profile for this process (its ISA level), to fill and write. NULL if out of memory. */
woolly_profile *woolly_profile_new(bool strict, const int32_t mix[WOOLLY_TOKENS_CLASSES]);
void woolly_profile_free(woolly_profile *p);

/* Adding rows, checked as the parser checks them (duplicates, layouts, steps). 0, or -1 with a message. */
int woolly_profile_add_layout(woolly_profile *p, const woolly_profile_layout *row, woolly_error *err);
int woolly_profile_add_matmul(woolly_profile *p, const woolly_profile_matmul *row, woolly_error *err);
int woolly_profile_add_attn(woolly_profile *p, const woolly_profile_attn *row, woolly_error *err);

/* Parses and checks a profile's text (len bytes); `path` names it in messages. NULL with a message
 * ("PATH line N: ...") if anything is wrong. */
woolly_profile *woolly_profile_parse(const char *text, size_t len, const char *path, woolly_error *err);

/* Reads and parses a file. */
woolly_profile *woolly_profile_read(const char *path, woolly_error *err);

/* The profile's place for this CPU: $XDG_CACHE_HOME/woolly/ (or ~/.cache/woolly/), named after the CPU
 * signature's hash. -1 if neither variable is set. */
int woolly_profile_default_path(char *buf, size_t n);

/* The profile a run uses: the file WOOLLY_TUNE_PROFILE names ("none": no profile), else the default
 * place's file if there is one. A profile that cannot be read or is rejected gives NULL after one
 * warning line on stderr naming the file and saying that the defaults are used (once per file and
 * reason per process); so does any profile while WOOLLY_ACT forces the activation formats. */
woolly_profile *woolly_profile_load_for_run(void);

/* The formats the profile's kernels may read (WOOLLY_ACT_MASK_STRICT under strict accuracy). */
unsigned woolly_profile_act_mask(const woolly_profile *p);

const woolly_profile_layout *woolly_profile_find_layout(const woolly_profile *p, enum woolly_type type,
                                                        int64_t rows, int64_t cols);
const woolly_profile_matmul *woolly_profile_find_matmul(const woolly_profile *p, enum woolly_type type,
                                                        int64_t rows, int64_t cols,
                                                        enum woolly_tokens_class cls, int32_t threads);

const woolly_profile_attn *woolly_profile_find_attn(const woolly_profile *p, enum woolly_type cache,
                                                    int32_t head_dim, enum woolly_attn_phase phase,
                                                    int32_t threads);

/* The header lines' values for this process. */
void woolly_profile_header_registry(char *buf, size_t n); /* "%016llx" of the registry hash */

#endif
