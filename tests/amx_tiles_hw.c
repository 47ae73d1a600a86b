/* The real tile instructions behind amx_tiles.h's names, for test_amx_tiles's comparison of the hardware
 * with the emulation. Built with -mamx-tile, -mamx-int8 and -mamx-bf16 (tests/CMakeLists.txt); a caller
 * runs each product only on a CPU whose report (woolly_cpu_get) has its AMX part (amx_int8, amx_bf16),
 * which includes the OS's leave for the tile state. */
#include "amx_tiles_hw.h"

#include "amx_tiles.h"

#define AMX_TILE_PRODUCT amx_hw_product
#define AMX_TILE_PRODUCT_BF16 amx_hw_bf16_product
#include "amx_tile_product.inc"
