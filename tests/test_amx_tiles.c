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

/* emu_product, emu_bf16_product: tile products in the emulation, the code the hardware comparison below
 * runs too. */
static void emu_product(const woolly_tile_config *cfg, const int32_t c0[16][16], const int8_t a[16][64],
                        const uint8_t b[16][64], int signed_b, int32_t c[16][16]);
static void emu_bf16_product(const woolly_tile_config *cfg, const float c0[16][16], const uint16_t a[16][32],
                             const uint16_t b[16][32], float c[16][16]);
#define AMX_TILE_PRODUCT emu_product
#define AMX_TILE_PRODUCT_BF16 emu_bf16_product
#define AMX_TILE_PRODUCT_LINKAGE static
#include "amx_tile_product.inc"

static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16); /* the test's values are exact in BF16 */
}

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

/* A BF16 bit pattern: exponents 127 +- 24 mostly, every 16th a zero or a denormal, either sign. */
static uint16_t random_bf16(tu_rng *rng)
{
    const uint64_t r = tu_rand_u64(rng);
    const uint16_t e = (uint16_t)(r % 16 == 0 ? 0 : 103 + (r >> 8) % 49);
    return (uint16_t)(((r >> 20) & 1) << 15 | e << 7 | ((r >> 24) & 0x7F));
}

/* The same for TDPBF16PS: random BF16 pairs over a wide range of exponents (with zeros and denormals
 * among them) and FP32 accumulators, on the hardware and in the emulation, compared bit for bit. */
Test(amx_tiles, the_hardwares_bf16_products_give_the_emulations_bits)
{
    if (!woolly_cpu_get()->amx_bf16) {
        cr_log_info("this CPU has no AMX BF16 (or the OS refuses its state): the emulation alone is tested");
        return;
    }
    static const int shapes[][3] = {{16, 16, 16}, {16, 8, 16}, {5, 8, 16}, {1, 3, 7}};
    tu_rng rng = {7};
    int first_bad = -1;
    for (int round = 0; round < 64 && first_bad < 0; round++) {
        const int *s = shapes[round % 4];
        static uint16_t a[16][32], b[16][32];
        static float c0[16][16], hw[16][16], emu[16][16];
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 32; j++)
                a[i][j] = random_bf16(&rng), b[i][j] = random_bf16(&rng);
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++)
                c0[i][j] = (float)((double)(int64_t)tu_rand_u64(&rng) * 0x1p-60);
        const woolly_tile_config c = shape(s[0], s[1], s[2]);
        memset(hw, 0x5A, sizeof hw);
        memcpy(emu, hw, sizeof emu);
        amx_hw_bf16_product(&c, c0, a, b, hw);
        emu_bf16_product(&c, c0, a, b, emu);
        if (memcmp(hw, emu, sizeof hw)) {
            first_bad = round;
            for (int m = 0; m < 16; m++)
                for (int n = 0; n < 16; n++)
                    if (memcmp(&hw[m][n], &emu[m][n], 4))
                        cr_log_error("round %d (%d x %d x %d): c[%d][%d] hardware %a, emulation %a", round, s[0], s[1],
                                     s[2], m, n, (double)hw[m][n], (double)emu[m][n]);
        }
    }
    cr_assert_lt(first_bad, 0, "TDPBF16PS: the hardware and the emulation differ from round %d", first_bad);
    /* A partial sum below the normal range is flushed before the next FMA: 2^-127 (from 2^-70 x 2^-57),
     * then + 2^-126, gives 2^-126, not 1.5 x 2^-126. */
    static uint16_t a[16][32], b[16][32];
    static float c0[16][16], hw[16][16], emu[16][16];
    memset(a, 0, sizeof a), memset(b, 0, sizeof b), memset(c0, 0, sizeof c0);
    a[0][0] = bf16_of(0x1p-70f), b[0][0] = bf16_of(0x1p-57f);
    a[0][2] = bf16_of(0x1p-63f), b[1][0] = bf16_of(0x1p-63f);
    const woolly_tile_config c = shape(16, 16, 16);
    amx_hw_bf16_product(&c, c0, a, b, hw);
    emu_bf16_product(&c, c0, a, b, emu);
    cr_assert_eq(emu[0][0], 0x1p-126f, "emulation: %a", (double)emu[0][0]);
    cr_assert_eq(memcmp(&hw[0][0], &emu[0][0], 4), 0, "a flushed partial sum: hardware %a, emulation %a",
                 (double)hw[0][0], (double)emu[0][0]);
}
#endif

/* TDPBF16PS in the emulation, on values whose sums are exact: small integers, the pairs' two halves added,
 * the accumulator kept; a denormal input reads as zero, and a result below the normal range is flushed. */
Test(amx_tiles, bf16_products_follow_the_definition)
{
    static uint16_t a[16][32], b[16][32];
    static float c0[16][16], c[16][16];
    for (int m = 0; m < 16; m++)
        for (int j = 0; j < 32; j++)
            a[m][j] = bf16_of((float)((m + j) % 7 - 3)), b[m][j] = bf16_of((float)((2 * m + j) % 5 - 2));
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++)
            c0[m][n] = (float)(m - n);
    const woolly_tile_config cfg = shape(16, 16, 16);
    emu_bf16_product(&cfg, c0, a, b, c);
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            double want = c0[m][n];
            for (int k = 0; k < 16; k++)
                for (int i = 0; i < 2; i++) {
                    float x, y;
                    uint32_t ux = (uint32_t)a[m][2 * k + i] << 16, uy = (uint32_t)b[k][2 * n + i] << 16;
                    memcpy(&x, &ux, 4), memcpy(&y, &uy, 4);
                    want += (double)x * y;
                }
            cr_assert_eq(c[m][n], (float)want, "c[%d][%d] = %g, want %g", m, n, (double)c[m][n], want);
        }
    /* a denormal A value contributes nothing; a sum below FLT_MIN becomes zero */
    memset(a, 0, sizeof a), memset(b, 0, sizeof b), memset(c0, 0, sizeof c0);
    a[0][0] = 0x0001, b[0][0] = bf16_of(1.0f);             /* denormal x 1 */
    a[1][0] = bf16_of(0x1p-70f), b[0][0] = bf16_of(1.0f);  /* row 1: 2^-70 x 1 = 2^-70, normal */
    a[2][0] = bf16_of(0x1p-70f), b[0][2] = bf16_of(0x1p-70f); /* row 2, column 1: 2^-140, below the range */
    emu_bf16_product(&cfg, c0, a, b, c);
    cr_assert_eq(c[0][0], 0.0f, "a denormal input counts: %g", (double)c[0][0]);
    cr_assert_eq(c[1][0], 0x1p-70f, "%g", (double)c[1][0]);
    cr_assert_eq(c[2][1], 0.0f, "a result below the normal range is kept: %g", (double)c[2][1]);
}
