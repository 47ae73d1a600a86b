/* The real tile instructions behind amx_tiles.h's names, for test_amx_tiles's comparison of the hardware
 * with the emulation. Built with the amx level's flags where the compiler takes them; a caller runs it
 * only on a CPU whose report (woolly_cpu_get) has AMX, which includes the OS's leave for its state. */
#include "amx_tiles_hw.h"

#include "amx_tiles.h"

#define AMX_TILE_PRODUCT amx_hw_product
#include "amx_tile_product.inc"
