/* The real tile instructions behind amx_tiles.h's names, for test_amx_tiles's comparison of the hardware
 * with the emulation. Built with the amx level's flags where the compiler takes them; a caller runs it
 * only on a CPU whose report (woolly_cpu_get) has AMX, which includes the OS's leave for its state. */
#include "amx_tiles_hw.h"

#include "amx_tiles.h"

void amx_hw_product(const woolly_tile_config *cfg, const int32_t c0[16][16], const int8_t a[16][64],
                    const uint8_t b[16][64], int signed_b, int32_t c[16][16])
{
    woolly_tile_loadconfig(cfg);
    woolly_tile_loadd(0, c0, 64);
    woolly_tile_loadd(1, a, 64);
    woolly_tile_loadd(2, b, 64);
    if (signed_b)
        woolly_tile_dpbssd(0, 1, 2);
    else
        woolly_tile_dpbsud(0, 1, 2);
    woolly_tile_stored(0, c, 64);
    woolly_tile_release();
}
