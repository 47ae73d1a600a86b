/* The AMX tile operations the amx level's kernels use, under names of our own: the instructions
 * themselves in a real build, or (WOOLLY_EMULATED_AMX, a test build for a CPU without AMX) a C version
 * of each, computed as Intel's manual defines it, so that every tile kernel's test runs on any x86 CPU.
 *
 * A tile kernel loads its configuration (palette 1: rows and bytes per row of each of the 8 tiles) at
 * entry, on whatever thread runs it, and releases the tiles at exit. The emulation keeps the tiles per
 * thread as the hardware does, and stops the program where the hardware would fault: a tile operation
 * on a thread whose configuration is not loaded, a tile the configuration leaves empty, or shapes the
 * instruction does not take.
 *
 * Tile numbers are constants (the instructions encode them): callers pass literal integers. */
#ifndef WOOLLY_AMX_TILES_H
#define WOOLLY_AMX_TILES_H

#include <stddef.h>
#include <stdint.h>

/* LDTILECFG's 64-byte operand (palette 1). */
typedef struct {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16]; /* bytes per row of tile i (at most 64) */
    uint8_t rows[16];   /* rows of tile i (at most 16) */
} __attribute__((aligned(64))) woolly_tile_config;
_Static_assert(sizeof(woolly_tile_config) == 64, "LDTILECFG takes 64 bytes");

#if defined(WOOLLY_EMULATED_AMX)
#include "kernels.h" /* woolly_bits_to_f32, woolly_f32_to_bits */

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    bool loaded;
    woolly_tile_config cfg;
    uint8_t t[8][16][64];
} woolly_emu_tiles;

/* Per thread, as the tile registers are (one copy per translation unit: each kernel is one). */
static _Thread_local woolly_emu_tiles woolly_emu_amx;

__attribute__((noreturn)) static inline void woolly_emu_tile_fault(const char *what, int tile)
{
    fprintf(stderr, "emulated AMX: %s (tile %d): the instruction would fault here\n", what, tile);
    abort();
}

/* A tile of the loaded configuration, with at least one row. */
static inline uint8_t (*woolly_emu_tile(int t, const char *op))[64]
{
    if (!woolly_emu_amx.loaded)
        woolly_emu_tile_fault(op, t);
    if (t < 0 || t >= 8 || !woolly_emu_amx.cfg.rows[t] || !woolly_emu_amx.cfg.colsb[t])
        woolly_emu_tile_fault(op, t);
    return woolly_emu_amx.t[t];
}

static inline void woolly_emu_tile_loadconfig(const woolly_tile_config *c)
{
    if (c->palette != 1)
        woolly_emu_tile_fault("ldtilecfg of a palette other than 1", -1);
    for (int i = 0; i < 8; i++)
        if (c->rows[i] > 16 || c->colsb[i] > 64 || (!c->rows[i]) != (!c->colsb[i]))
            woolly_emu_tile_fault("ldtilecfg of a tile larger than 16 x 64 bytes, or of rows without bytes", i);
    memset(&woolly_emu_amx, 0, sizeof woolly_emu_amx); /* loading a configuration zeroes the tiles */
    woolly_emu_amx.cfg = *c;
    woolly_emu_amx.loaded = true;
}

static inline void woolly_emu_tile_release(void)
{
    memset(&woolly_emu_amx, 0, sizeof woolly_emu_amx);
}

/* TILELOADD: rows of colsb bytes, stride bytes apart; the rest of the tile is zero. */
static inline void woolly_emu_tile_loadd(int t, const void *base, long stride)
{
    uint8_t(*d)[64] = woolly_emu_tile(t, "tileloadd");
    memset(d, 0, sizeof woolly_emu_amx.t[0]);
    for (int r = 0; r < woolly_emu_amx.cfg.rows[t]; r++)
        memcpy(d[r], (const char *)base + (long)r * stride, woolly_emu_amx.cfg.colsb[t]);
}

static inline void woolly_emu_tile_stored(int t, void *base, long stride)
{
    uint8_t(*s)[64] = woolly_emu_tile(t, "tilestored");
    for (int r = 0; r < woolly_emu_amx.cfg.rows[t]; r++)
        memcpy((char *)base + (long)r * stride, s[r], woolly_emu_amx.cfg.colsb[t]);
}

static inline void woolly_emu_tile_zero(int t)
{
    memset(woolly_emu_tile(t, "tilezero"), 0, sizeof woolly_emu_amx.t[0]);
}

/* The checks of a tile product (TDPB*D, TDPBF16PS) c += a b: three distinct configured tiles whose
 * shapes meet (a and c of the same rows, b of a's bytes per row / 4 rows and of c's bytes per row). */
static inline const woolly_tile_config *woolly_emu_product_tiles(int c, int a, int b, const char *op)
{
    woolly_emu_tile(c, op), woolly_emu_tile(a, op), woolly_emu_tile(b, op);
    const woolly_tile_config *cfg = &woolly_emu_amx.cfg;
    if (c == a || c == b || a == b)
        woolly_emu_tile_fault("a tile product with a tile twice", c);
    if (cfg->rows[a] != cfg->rows[c] || cfg->colsb[a] % 4 || cfg->rows[b] != cfg->colsb[a] / 4 ||
        cfg->colsb[b] != cfg->colsb[c] || cfg->colsb[c] % 4)
        woolly_emu_tile_fault("a tile product of tiles whose shapes do not meet", c);
    return cfg;
}

/* TDPB[SU][SU]D: c[m][n] += sum over k, i < 4 of a[m][4k + i] x b[k][4n + i] in int32 (wrapping), a's
 * bytes signed when sa, b's when sb. */
static inline void woolly_emu_tile_dpb(int c, int a, int b, bool sa, bool sb)
{
    const woolly_tile_config *cfg = woolly_emu_product_tiles(c, a, b, "tdpb*d");
    uint8_t(*tc)[64] = woolly_emu_amx.t[c], (*ta)[64] = woolly_emu_amx.t[a], (*tb)[64] = woolly_emu_amx.t[b];
    for (int m = 0; m < cfg->rows[c]; m++)
        for (int n = 0; n < cfg->colsb[c] / 4; n++) {
            int32_t acc;
            memcpy(&acc, &tc[m][4 * n], 4);
            uint32_t sum = (uint32_t)acc;
            for (int k = 0; k < cfg->colsb[a] / 4; k++)
                for (int i = 0; i < 4; i++) {
                    const int32_t x = sa ? (int8_t)ta[m][4 * k + i] : ta[m][4 * k + i];
                    const int32_t y = sb ? (int8_t)tb[k][4 * n + i] : tb[k][4 * n + i];
                    sum += (uint32_t)(x * y);
                }
            memcpy(&tc[m][4 * n], &sum, 4);
        }
}

/* TDPBF16PS, as Intel's manual (SDM, 2023 and later) defines it: per row m of C, two FP32 partial sums per
 * column n, of the even and of the odd BF16 of each pair, from zero, each gaining a[m][2k + i] x b[k][2n + i]
 * in turn over k (an FMA: the product of two BF16 values is exact in FP32); then c[m][n] + (even + odd).
 * Round to nearest even throughout, input denormals read as zero and output denormals flushed to zero
 * (of their sign), whatever MXCSR says. The C below computes in float under the default rounding (fmaf
 * for the FMA, whose product must not round on its own where it falls below the normal range), and
 * flushes by hand. */
static inline float woolly_emu_daz(uint32_t bits)
{
    return woolly_bits_to_f32(bits & 0x7F800000u ? bits : bits & 0x80000000u);
}

static inline float woolly_emu_ftz(float f)
{
    return woolly_emu_daz(woolly_f32_to_bits(f));
}

static inline void woolly_emu_tile_dpbf16ps(int c, int a, int b)
{
    const woolly_tile_config *cfg = woolly_emu_product_tiles(c, a, b, "tdpbf16ps");
    uint8_t(*tc)[64] = woolly_emu_amx.t[c], (*ta)[64] = woolly_emu_amx.t[a], (*tb)[64] = woolly_emu_amx.t[b];
    for (int m = 0; m < cfg->rows[c]; m++)
        for (int n = 0; n < cfg->colsb[c] / 4; n++) {
            float part[2] = {0.0f, 0.0f};
            for (int k = 0; k < cfg->colsb[a] / 4; k++)
                for (int i = 0; i < 2; i++) {
                    uint16_t x, y;
                    memcpy(&x, &ta[m][4 * k + 2 * i], 2);
                    memcpy(&y, &tb[k][4 * n + 2 * i], 2);
                    part[i] = woolly_emu_ftz(fmaf(woolly_emu_daz((uint32_t)x << 16), woolly_emu_daz((uint32_t)y << 16), part[i]));
                }
            uint32_t acc;
            memcpy(&acc, &tc[m][4 * n], 4);
            const float sum = woolly_emu_ftz(woolly_emu_daz(acc) + woolly_emu_ftz(part[0] + part[1]));
            memcpy(&tc[m][4 * n], &sum, 4);
        }
}

#define woolly_tile_loadconfig(cfg) woolly_emu_tile_loadconfig(cfg)
#define woolly_tile_release() woolly_emu_tile_release()
#define woolly_tile_loadd(t, base, stride) woolly_emu_tile_loadd(t, base, (long)(stride))
#define woolly_tile_stored(t, base, stride) woolly_emu_tile_stored(t, base, (long)(stride))
#define woolly_tile_zero(t) woolly_emu_tile_zero(t)
#define woolly_tile_dpbsud(c, a, b) woolly_emu_tile_dpb(c, a, b, true, false)
#define woolly_tile_dpbssd(c, a, b) woolly_emu_tile_dpb(c, a, b, true, true)
#define woolly_tile_dpbf16ps(c, a, b) woolly_emu_tile_dpbf16ps(c, a, b)
#else
#include <immintrin.h>

#define woolly_tile_loadconfig(cfg) _tile_loadconfig(cfg)
#define woolly_tile_release() _tile_release()
#define woolly_tile_loadd(t, base, stride) _tile_loadd(t, base, (long)(stride))
#define woolly_tile_stored(t, base, stride) _tile_stored(t, base, (long)(stride))
#define woolly_tile_zero(t) _tile_zero(t)
#define woolly_tile_dpbsud(c, a, b) _tile_dpbsud(c, a, b)
#define woolly_tile_dpbssd(c, a, b) _tile_dpbssd(c, a, b)
#define woolly_tile_dpbf16ps(c, a, b) _tile_dpbf16ps(c, a, b) /* needs -mamx-bf16 where it is used */
#endif

#endif
