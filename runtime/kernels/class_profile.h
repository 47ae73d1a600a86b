/* Default profiles shipped per CPU class (tune/defaults/<class>.profile, built into libwoolly): what a
 * run takes on a CPU of that class when no tuning profile of its own says otherwise. The spec keeps one
 * portable default per slot; a class's profile names the kernels measured faster on its cores, and the
 * attention tiles that pay there, as BLIS keeps its choices per microarchitecture. Without a class the
 * spec's defaults stand; a tuning profile of the machine (model/profile.h) overrides both.
 *
 *   woolly-default-profile 1                   format version
 *   class intel-spr                            the class: the file's name without .profile
 *   match x86_64 GenuineIntel family 6         the CPUs it is for, against their signature (cpu.h): the
 *         model 143,207 features avx512f       architecture and vendor, then optionally `family` and
 *         lacks avx512fp16                     `model` (one of those listed, decimal), `features` (all
 *                                              of those listed) and `lacks` (none of them), in this
 *                                              order (one line)
 *   # comment lines start with '#': the measurements that justify the rows
 *   default Q4_K avx512 tokens=1 kernel=q4k_q8_gemv_avx512_r16_1x64_pf4k
 *                                              the default kernel of a slot: weights, ISA level and
 *                                              class of batch sizes (1: the GEMV; 2-16: the GEMM of a
 *                                              few tokens, a small-batch tile; 17+: the GEMM), in place
 *                                              of the spec's
 *   attn-rounded bf16,f16,i16                  the operand formats of rounded attention tiles in the
 *                                              order they are tried (woolly_kernel_choose_attn); the
 *                                              spec's is f16,i16
 *   attn-decode-l2-ahead none                  the one-query attention path's prefetch of K and V into
 *                                              L2: none, or N blocks ahead (1 to 16); the kernels' own
 *                                              distance otherwise
 *   end 2                                      the number of rows: a cut file fails
 *
 * It is read by the profile reader (profile_text.h) and held to its rules, and checked against this
 * build: every kernel exists and fits its slot, no slot is named twice, and the three defaults of each
 * (weights, level) it touches still share their activation format and layout (a matrix is repacked for
 * its GEMV and its GEMMs read the same layout). Anything else rejects the file; the tests read every
 * shipped profile, so a malformed one fails there, not in a user's run. */
#ifndef WOOLLY_CLASS_PROFILE_H
#define WOOLLY_CLASS_PROFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "matmul.h"
#include "registry.h"

#define WOOLLY_CLASS_PROFILE_MAGIC "woolly-default-profile"
#define WOOLLY_CLASS_PROFILE_FORMAT 1

enum {
    WOOLLY_CLASS_NAME_MAX = 32, /* bytes of a class name, its NUL included */
    WOOLLY_CLASS_MAX_LIST = 16, /* families, models or features in a match line's list */
    WOOLLY_CLASS_WORD_MAX = 24, /* bytes of an architecture, vendor or feature name, NUL included */
    WOOLLY_CLASS_MAX_DEFAULTS = 64,
    WOOLLY_CLASS_MAX_ROUNDED = 3, /* bf16, f16, i16 */
};

/* A match line: empty lists match anything. */
typedef struct woolly_class_match {
    char arch[WOOLLY_CLASS_WORD_MAX], vendor[WOOLLY_CLASS_WORD_MAX];
    unsigned families[WOOLLY_CLASS_MAX_LIST], models[WOOLLY_CLASS_MAX_LIST];
    int n_families, n_models;
    char features[WOOLLY_CLASS_MAX_LIST][WOOLLY_CLASS_WORD_MAX],
        lacks[WOOLLY_CLASS_MAX_LIST][WOOLLY_CLASS_WORD_MAX];
    int n_features, n_lacks;
} woolly_class_match;

typedef struct woolly_class_default {
    enum woolly_tokens_class tokens;
    const woolly_kernel *kernel; /* its weights and level name the slot */
} woolly_class_default;

typedef struct woolly_class_profile {
    char name[WOOLLY_CLASS_NAME_MAX];
    woolly_class_match match;
    woolly_class_default defaults[WOOLLY_CLASS_MAX_DEFAULTS];
    int n_defaults;
    enum woolly_act rounded_attn[WOOLLY_CLASS_MAX_ROUNDED]; /* valid when n_rounded_attn > 0 */
    int n_rounded_attn;                                     /* 0: the spec's order */
    /* The one-query attention path's L2 prefetch (woolly_attn_args.decode_l2_blocks): 0 the kernels'
     * own distance, WOOLLY_ATTN_NO_L2_PREFETCH none, else blocks ahead. */
    int32_t attn_decode_l2;
} woolly_class_profile;

/* Parses and checks a class profile's text (len bytes) against the kernels ks[0 .. n_ks) of this build
 * (the registry's list, whose is_default and is_small_default bits are the spec's); `path` names it in
 * messages. 0, or -1 with a message ("PATH line N: ..."), out then unusable. */
int woolly_class_profile_parse(const char *text, size_t len, const char *path, const woolly_kernel *ks,
                               int n_ks, woolly_class_profile *out, woolly_error *err);

/* Whether a CPU with this signature (woolly_cpu_signature's line) belongs to the class. */
bool woolly_class_profile_matches(const woolly_class_profile *p, const char *cpu_signature);

/* The profiles built into this build, in the order they are tried (the first that matches a CPU is its
 * class): tune/defaults/<class>.profile for this build's architecture, by file name, written into a C
 * source by the build (runtime/kernels/shipped_profiles.cmake). */
typedef struct woolly_shipped_profile {
    const char *file; /* e.g. "zen5.profile" */
    const char *text; /* len bytes, not NUL-terminated */
    size_t len;
} woolly_shipped_profile;

extern const woolly_shipped_profile woolly_shipped_profiles[];
extern const int woolly_n_shipped_profiles;

#endif
