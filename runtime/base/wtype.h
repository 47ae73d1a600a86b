/* Tensor element types, numbered as GGUF numbers them. The table in wtype.c gives each known type its
 * block geometry; a type missing from it is "unknown" and a file using it is rejected. Which types the
 * engine can compute with is a separate question (quant.h). */
#ifndef WOOLLY_WTYPE_H
#define WOOLLY_WTYPE_H

#include <stddef.h>
#include <stdint.h>

enum woolly_type {
    WOOLLY_TYPE_F32 = 0,
    WOOLLY_TYPE_F16 = 1,
    WOOLLY_TYPE_Q4_0 = 2,
    WOOLLY_TYPE_Q4_1 = 3,
    WOOLLY_TYPE_Q5_0 = 6,
    WOOLLY_TYPE_Q5_1 = 7,
    WOOLLY_TYPE_Q8_0 = 8,
    WOOLLY_TYPE_Q8_1 = 9,
    WOOLLY_TYPE_Q2_K = 10,
    WOOLLY_TYPE_Q3_K = 11,
    WOOLLY_TYPE_Q4_K = 12,
    WOOLLY_TYPE_Q5_K = 13,
    WOOLLY_TYPE_Q6_K = 14,
    WOOLLY_TYPE_Q8_K = 15,
    WOOLLY_TYPE_IQ4_XS = 23,
    WOOLLY_TYPE_I8 = 24,
    WOOLLY_TYPE_I16 = 25,
    WOOLLY_TYPE_I32 = 26,
    WOOLLY_TYPE_I64 = 27,
    WOOLLY_TYPE_F64 = 28,
    WOOLLY_TYPE_BF16 = 30,
    WOOLLY_TYPE_IQ4_NL = 20,
    WOOLLY_TYPE_COUNT = 40 /* bound for the lookup table, not a type */
};

typedef struct woolly_type_info {
    const char *name;     /* "Q4_K" */
    uint32_t block_elems; /* elements per block (1 for plain types) */
    uint32_t block_bytes; /* bytes per block */
} woolly_type_info;

/* NULL if `type` is not a type this build knows. */
const woolly_type_info *woolly_type_get(uint32_t type);

/* Type by name ("Q4_K", case-sensitive); -1 if unknown. */
int woolly_type_from_name(const char *name);

/* Bytes of a row of `n` elements; 0 if `n` is not a multiple of the block size. */
size_t woolly_row_bytes(enum woolly_type type, int64_t n);

#endif
