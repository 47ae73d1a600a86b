/* Tile products on the CPU's own AMX unit (tests/amx_tiles_hw.c), for test_amx_tiles's comparison with
 * the emulation: tiles 0 (C, from c0), 1 (A) and 2 (B) as cfg configures them; tile 0 stored to c (its
 * configured rows and bytes only). */
#ifndef WOOLLY_TESTS_AMX_TILES_HW_H
#define WOOLLY_TESTS_AMX_TILES_HW_H

#include <stdint.h>

#include "amx_tiles.h"

/* TDPBSSD when signed_b, else TDPBSUD. Only on a CPU whose woolly_cpu_get() reports amx_int8. */
void amx_hw_product(const woolly_tile_config *cfg, const int32_t c0[16][16], const int8_t a[16][64],
                    const uint8_t b[16][64], int signed_b, int32_t c[16][16]);

/* TDPBF16PS: a and b hold BF16 pairs, c0 and c FP32. Only on a CPU whose woolly_cpu_get() reports
 * amx_bf16. */
void amx_hw_bf16_product(const woolly_tile_config *cfg, const float c0[16][16], const uint16_t a[16][32],
                         const uint16_t b[16][32], float c[16][16]);

#endif
