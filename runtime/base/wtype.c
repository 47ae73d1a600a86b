#include "wtype.h"

#include <string.h>

/* Block geometry from the GGUF format description. */
static const woolly_type_info TYPES[WOOLLY_TYPE_COUNT] = {
    [WOOLLY_TYPE_F32] = {"F32", 1, 4},       [WOOLLY_TYPE_F16] = {"F16", 1, 2},
    [WOOLLY_TYPE_Q4_0] = {"Q4_0", 32, 18},   [WOOLLY_TYPE_Q4_1] = {"Q4_1", 32, 20},
    [WOOLLY_TYPE_Q5_0] = {"Q5_0", 32, 22},   [WOOLLY_TYPE_Q5_1] = {"Q5_1", 32, 24},
    [WOOLLY_TYPE_Q8_0] = {"Q8_0", 32, 34},   [WOOLLY_TYPE_Q8_1] = {"Q8_1", 32, 36},
    [WOOLLY_TYPE_Q2_K] = {"Q2_K", 256, 84},  [WOOLLY_TYPE_Q3_K] = {"Q3_K", 256, 110},
    [WOOLLY_TYPE_Q4_K] = {"Q4_K", 256, 144}, [WOOLLY_TYPE_Q5_K] = {"Q5_K", 256, 176},
    [WOOLLY_TYPE_Q6_K] = {"Q6_K", 256, 210}, [WOOLLY_TYPE_Q8_K] = {"Q8_K", 256, 292},
    [WOOLLY_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18},
    [WOOLLY_TYPE_I8] = {"I8", 1, 1},         [WOOLLY_TYPE_I16] = {"I16", 1, 2},
    [WOOLLY_TYPE_I32] = {"I32", 1, 4},       [WOOLLY_TYPE_I64] = {"I64", 1, 8},
    [WOOLLY_TYPE_F64] = {"F64", 1, 8},       [WOOLLY_TYPE_BF16] = {"BF16", 1, 2},
    [WOOLLY_TYPE_IQ4_XS] = {"IQ4_XS", 256, 136},
};

const woolly_type_info *woolly_type_get(uint32_t type)
{
    if (type >= WOOLLY_TYPE_COUNT || TYPES[type].name == NULL)
        return NULL;
    return &TYPES[type];
}

int woolly_type_from_name(const char *name)
{
    for (int t = 0; t < WOOLLY_TYPE_COUNT; t++)
        if (TYPES[t].name && strcmp(TYPES[t].name, name) == 0)
            return t;
    return -1;
}

size_t woolly_row_bytes(enum woolly_type type, int64_t n)
{
    const woolly_type_info *ti = woolly_type_get((uint32_t)type);
    if (!ti || n < 0 || n % ti->block_elems != 0)
        return 0;
    return (size_t)(n / ti->block_elems) * ti->block_bytes;
}
