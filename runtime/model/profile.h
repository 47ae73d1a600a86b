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
 *   end 2                                         the number of layout and matmul rows: a cut file fails
 *
 * Kernels are named by name. The header must match this process exactly (format, version, CPU
 * signature, registry hash, ISA level); every row must parse, name kernels this build has and this CPU
 * runs, fit its matrix (woolly_matmul_step_check) and be the only row of its key; a matmul row needs the
 * layout row of its shape before it. Anything else rejects the whole profile: it is used whole or not at
 * all.
 *
 * Attention rows will read `attn CACHE dHEAD_DIM decode|prefill threads=T kernel=NAME kv_block=B
 * q_block=Q kv_split=S us=F default=NAME default_us=F` once attention kernels take block sizes; this
 * format version has none. */
#ifndef WOOLLY_PROFILE_H
#define WOOLLY_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "matmul.h"
#include "registry.h"

#define WOOLLY_PROFILE_MAGIC "woolly-tune-profile"
#define WOOLLY_PROFILE_FORMAT 1
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

typedef struct woolly_profile {
    char path[1024]; /* where it was read from ("" if not from a file) */
    enum woolly_isa isa;
    bool strict;                        /* F16/F32 activations only */
    int32_t mix[WOOLLY_TOKENS_CLASSES]; /* tokens per class the layouts were chosen for */
    woolly_profile_layout *layouts;
    int32_t n_layouts, cap_layouts;
    woolly_profile_matmul *matmuls;
    int32_t n_matmuls, cap_matmuls;
} woolly_profile;

/* An empty profile for this process (its ISA level), to fill and write. NULL if out of memory. */
woolly_profile *woolly_profile_new(bool strict, const int32_t mix[WOOLLY_TOKENS_CLASSES]);
void woolly_profile_free(woolly_profile *p);

/* Adding rows, checked as the parser checks them (duplicates, layouts, steps). 0, or -1 with a message. */
int woolly_profile_add_layout(woolly_profile *p, const woolly_profile_layout *row, woolly_error *err);
int woolly_profile_add_matmul(woolly_profile *p, const woolly_profile_matmul *row, woolly_error *err);

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

/* The header lines' values for this process. */
void woolly_profile_header_registry(char *buf, size_t n); /* "%016llx" of the registry hash */

#endif
