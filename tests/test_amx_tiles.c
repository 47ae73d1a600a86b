/* The C version of AMX's tile instructions (runtime/kernels/amx_tiles.h), which the amx kernels' tests
 * run on CPUs without AMX: its products against a plain sum of the manual's definition (signed and
 * unsigned bytes, wrapping int32 sums, partial tiles), and the faults of the hardware where a kernel
 * would misuse the tiles. Portable C, so it runs in every build, whatever the CPU. */
#define WOOLLY_EMULATED_AMX
#include "amx_tiles.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "testutil.h"

/* emu_product: a tile product in the emulation, the code the hardware comparison below runs too. */
static void emu_product(const woolly_tile_config *cfg, const int32_t c0[16][16], const int8_t a[16][64],
                        const uint8_t b[16][64], int signed_b, int32_t c[16][16]);
#define AMX_TILE_PRODUCT emu_product
#define AMX_TILE_PRODUCT_LINKAGE static
#include "amx_tile_product.inc"

/* Tiles 0 (C: rows x 4n bytes), 1 (A: rows x 4k), 2 (B: k rows x 4n). */
static woolly_tile_config shape(int rows, int k, int n)
{
    woolly_tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    c.rows[0] = (uint8_t)rows, c.colsb[0] = (uint16_t)(4 * n);
    c.rows[1] = (uint8_t)rows, c.colsb[1] = (uint16_t)(4 * k);
    c.rows[2] = (uint8_t)k, c.colsb[2] = (uint16_t)(4 * n);
    return c;
}

static void configure(int rows, int k, int n)
{
    const woolly_tile_config c = shape(rows, k, n);
    woolly_tile_loadconfig(&c);
}

static void check_product(int rows, int k, int n, int signed_b, uint64_t seed)
{
    int8_t a[16][64];
    uint8_t b[16][64];
    int32_t c0[16][16], c[16][16];
    tu_rng rng = {seed};
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 64; j++)
            a[i][j] = (int8_t)tu_rand_u64(&rng), b[i][j] = (uint8_t)tu_rand_u64(&rng);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) /* near the int32 limits, so that a sum wraps now and then */
            c0[i][j] = (int32_t)(uint32_t)(tu_rand_u64(&rng) | 0x7FFF0000u);
    const woolly_tile_config cfg = shape(rows, k, n);
    memset(c, 0x5A, sizeof c);
    emu_product(&cfg, c0, a, b, signed_b, c);
    for (int m = 0; m < rows; m++)
        for (int j = 0; j < n; j++) {
            uint32_t want = (uint32_t)c0[m][j];
            for (int kk = 0; kk < 4 * k; kk++)
                want += (uint32_t)(a[m][kk] * (signed_b ? (int8_t)b[kk / 4][4 * j + kk % 4] : b[kk / 4][4 * j + kk % 4]));
            cr_assert_eq((uint32_t)c[m][j], want, "%d x %d x %d: c[%d][%d]", rows, k, n, m, j);
        }
    /* a store writes the configured rows and bytes only */
    for (int m = 0; m < 16; m++)
        for (int j = 0; j < 16; j++)
            if (m >= rows || j >= n)
                cr_assert_eq((uint32_t)c[m][j], 0x5A5A5A5Au, "c[%d][%d] outside the tile was written", m, j);
}

Test(amx_tiles, products_follow_the_definition)
{
    check_product(16, 16, 16, 0, 1);
    check_product(16, 16, 16, 1, 2);
    check_product(16, 8, 16, 0, 3); /* the kernels' 32-value chains: 8 rows of B */
    check_product(16, 4, 16, 0, 4); /* and their 16-value ones */
    check_product(5, 8, 16, 0, 5);  /* a last step's partial tiles */
    check_product(1, 3, 7, 1, 6);
}

/* A partial tile moves its configured rows and bytes only, and a new configuration zeroes every tile. */
Test(amx_tiles, partial_tiles_move_their_rows_and_bytes_and_a_configuration_zeroes_the_tiles)
{
    uint8_t src[16][64], out[16][64];
    memset(src, 0x77, sizeof src);
    woolly_tile_config c = {.palette = 1};
    c.rows[0] = 16, c.colsb[0] = 64;
    c.rows[3] = 3, c.colsb[3] = 12;
    woolly_tile_loadconfig(&c);
    woolly_tile_loadd(0, src, 64);
    woolly_tile_loadd(3, src, 64);
    memset(out, 0, sizeof out);
    woolly_tile_stored(3, out, 64);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 64; j++)
            cr_assert_eq(out[i][j], i < 3 && j < 12 ? 0x77 : 0, "a 3 x 12-byte tile's store at [%d][%d]", i, j);
    woolly_tile_loadconfig(&c);
    woolly_tile_stored(0, out, 64);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 64; j++)
            cr_assert_eq(out[i][j], 0, "a new configuration keeps tile data at [%d][%d]", i, j);
    woolly_tile_release();
}

Test(amx_tiles, a_product_without_a_configuration_faults, .signal = SIGABRT)
{
    woolly_tile_dpbsud(0, 1, 2); /* a fresh thread of the test: no ldtilecfg ran on it */
}

Test(amx_tiles, a_product_after_release_faults, .signal = SIGABRT)
{
    configure(16, 16, 16);
    woolly_tile_release();
    woolly_tile_zero(0);
}

Test(amx_tiles, a_product_of_unmatched_shapes_faults, .signal = SIGABRT)
{
    woolly_tile_config c = {.palette = 1};
    c.rows[0] = 16, c.colsb[0] = 64;
    c.rows[1] = 16, c.colsb[1] = 32;
    c.rows[2] = 4, c.colsb[2] = 64; /* A's 32 bytes need 8 rows of B */
    woolly_tile_loadconfig(&c);
    woolly_tile_dpbsud(0, 1, 2);
}

Test(amx_tiles, an_unconfigured_tile_faults, .signal = SIGABRT)
{
    configure(16, 16, 16);
    woolly_tile_zero(5);
}

#if defined(WOOLLY_TEST_AMX_HW)
#include "amx_tiles_hw.h"
#include "cpu.h"

/* On a CPU with AMX (and the OS's leave for its state), the real instructions give the emulation's bits:
 * random products of every shape the kernels configure and a few they do not, from accumulators near the
 * int32 limits, with signed and unsigned B. Where the CPU has no AMX there is nothing to compare with,
 * and the test says so in its log. */
Test(amx_tiles, the_hardware_gives_the_emulations_bits)
{
    if (!woolly_cpu_get()->amx_int8) {
        cr_log_info("this CPU has no AMX (or the OS refuses its state): the emulation alone is tested");
        return;
    }
    static const int shapes[][3] = {{16, 16, 16}, {16, 8, 16}, {16, 4, 16}, {5, 8, 16}, {1, 3, 7}, {12, 16, 9}};
    tu_rng rng = {42};
    for (int round = 0; round < 64; round++) {
        const int *s = shapes[round % 6];
        int8_t a[16][64];
        uint8_t b[16][64];
        int32_t c0[16][16], hw[16][16], emu[16][16];
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 64; j++)
                a[i][j] = (int8_t)tu_rand_u64(&rng), b[i][j] = (uint8_t)tu_rand_u64(&rng);
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++)
                c0[i][j] = (int32_t)(uint32_t)(tu_rand_u64(&rng) | (round & 1 ? 0x7FFF0000u : 0));
        const woolly_tile_config c = shape(s[0], s[1], s[2]);
        const int signed_b = round / 6 % 2;
        memset(hw, 0x5A, sizeof hw);
        memcpy(emu, hw, sizeof emu);
        amx_hw_product(&c, c0, a, b, signed_b, hw);
        emu_product(&c, c0, a, b, signed_b, emu);
        cr_assert_eq(memcmp(hw, emu, sizeof hw), 0, "round %d (%d x %d x %d, %s B): hardware and emulation differ",
                     round, s[0], s[1], s[2], signed_b ? "signed" : "unsigned");
    }
}
#endif
