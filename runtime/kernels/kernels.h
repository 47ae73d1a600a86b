/* The kernel contract: everything a generated kernel may include, and the only seam between the
 * runtime and generated code.
 *
 * Weight block layouts (GGUF's, little-endian, byte-packed, and the repacked ones below), the
 * half-precision conversions, the activation formats, and the signatures of the kernel kinds:
 *
 *   matmul  y[t][r] = sum_i x[t][i] * W[r][i]   for tokens t in [0, m), weight rows r in [r0, r1)
 *           W is in a weight format and a weight layout (below); x holds m activation rows in an
 *           activation format (x_row_bytes apart); y is float (y_stride floats apart per token), and
 *           the kernel stores y (or adds to it, with `accumulate`). A kernel handles any m >= 1 and any
 *           r0 < r1 itself, including partial register tiles; k is always a multiple of the weight
 *           format's block (and of 32 for int8 activations). GEMV slots are called with m == 1 (decode),
 *           GEMM slots with m >= 1 (prompt batches). The runtime splits [0, rows) across threads; a
 *           kernel never spawns threads or allocates.
 *
 *   weight layouts
 *           rows      GGUF's: row r at (const char *)w + r * w_row_bytes (w_row_bytes = the row's bytes).
 *           r<G>      rows interleaved in groups of G (e.g. q4k_r16): group g = rows [gG, gG + G) at
 *                     (const char *)w + g * G * w_row_bytes, where w_row_bytes = (k / block) *
 *                     sizeof(the layout's block) / G; inside a group, the layout's blocks follow in
 *                     k order (block b of the group at group + b * sizeof(block)), so a k offset is a
 *                     pointer offset. The last group is padded with zero rows; r0 is a multiple of G
 *                     (r1 need not be: rows >= r1 are computed, never stored). A layout's repack
 *                     routine (woolly_repack_<layout>) makes it from GGUF rows and its unpack routine
 *                     gives a GGUF row back (for embedding lookups and tests).
 *
 *   attn    for one token and one KV head: the n_group query heads that share that KV head attend to
 *           cache positions 0..n_kv-1 (causality is the caller's choice of n_kv). Softmax over
 *           scale * q.k, output the weighted sum of v. K and V are in the cache format (F16 or F32).
 *
 *   pack    one row of k floats into an activation format (k a multiple of 32 for int8).
 *
 * Naming grammar, written down once:
 *   matmul  <weights>_<activations>_<op>_<isa>[_<layout>]_<tokens>x<rows>[_<variant>], e.g.
 *           q4k_f32_gemv_scalar_1x1 (weights q4k, activations f32, GEMV, ISA scalar, GGUF rows, tile
 *           1 token x 1 row), q4k_q8_gemm_avx512_r16_4x16 (16-row interleaved weights, 4 x 16 tile);
 *           the variant suffix names a template parameter other than the tile (an unroll, a prefetch).
 *   attn    attn_<kv type>_flash_<isa>_<d<head dim> or any>
 *   pack    pack_<activations>_<isa>
 *   layout  <weights>_r<G>, its routines repack_<layout> and unpack_<layout>
 * The symbol is woolly_<name>, the file <name>.c. ISA tokens are dispatch levels: scalar, avx2
 * (+FMA, F16C), avx512 (F/BW/VL/VNNI), neon (aarch64 + dot product); a kernel may also require
 * features beyond its level (BF16, AVX-VNNI, i8mm), checked at run time. */
#ifndef WOOLLY_KERNELS_H
#define WOOLLY_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- weight blocks ---------------------------------------------------------------------------- */

#define WOOLLY_QK8_0 32
#define WOOLLY_QK_K 256
#define WOOLLY_K_SCALE_BYTES 12

typedef struct {
    uint16_t d; /* f16 scale */
    int8_t qs[WOOLLY_QK8_0];
} woolly_block_q8_0;
_Static_assert(sizeof(woolly_block_q8_0) == 34, "Q8_0 block is 34 bytes");

/* 8 sub-blocks of 32; 6-bit scale and min per sub-block packed in `scales`; value = d*sc*q - dmin*m */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[WOOLLY_K_SCALE_BYTES];
    uint8_t qs[WOOLLY_QK_K / 2];
} woolly_block_q4_k;
_Static_assert(sizeof(woolly_block_q4_k) == 144, "Q4_K block is 144 bytes");

typedef struct {
    uint16_t d, dmin;
    uint8_t scales[WOOLLY_K_SCALE_BYTES];
    uint8_t qh[WOOLLY_QK_K / 8];
    uint8_t qs[WOOLLY_QK_K / 2];
} woolly_block_q5_k;
_Static_assert(sizeof(woolly_block_q5_k) == 176, "Q5_K block is 176 bytes");

/* 16 sub-blocks of 16; int8 scale per sub-block; value = d*sc*(q - 32) with q 6 bits */
typedef struct {
    uint8_t ql[WOOLLY_QK_K / 2];
    uint8_t qh[WOOLLY_QK_K / 4];
    int8_t scales[WOOLLY_QK_K / 16];
    uint16_t d;
} woolly_block_q6_k;
_Static_assert(sizeof(woolly_block_q6_k) == 210, "Q6_K block is 210 bytes");

/* ---- repacked weight layouts (see "weight layouts" at the top) ---------------------------------- */

/* Q4_K with 16 rows interleaved (layout q4k_r16): block b of a group is super-block b (values 256b ..
 * 256b + 255) of each of its 16 rows. Scales and mins are unpacked to a byte each; the quants are
 * arranged so that one 64-byte load holds 4 consecutive values of each of the 16 rows (row i's at bytes
 * 4i .. 4i + 3), the shape of one vpdpbusd/sdot operand: load h (0..3) of sub-block j holds values
 * 4h .. 4h + 3 of the sub-block in its low nibbles and values 16 + 4h .. 16 + 4h + 3 in its high
 * nibbles. Value = d * sc * q - dmin * mn, as in woolly_block_q4_k. */
typedef struct {
    uint16_t d[16], dmin[16];     /* f16, per row */
    uint8_t sc[8][16], mn[8][16]; /* 6-bit scale and min of sub-block j of row i at [j][i] */
    uint8_t qs[8][4][64];         /* [sub-block j][load h][4 * row + l] */
} woolly_block_q4k_r16;
_Static_assert(sizeof(woolly_block_q4k_r16) == 2368, "Q4_K r16 block is 2368 bytes");

/* The 4-row layouts (q4k_r4, q6k_r4, q80_r4): the shape of q4k_r16 for 128-bit registers. One 16-byte
 * load of quants holds 4 consecutive values of each of the 4 rows (row i's at bytes 4i .. 4i + 3): the
 * operand of one sdot against 4 activation bytes (NEON's by-element form picks them from a register of
 * 16), or, zipped in pairs, of one smmla. Per-row scales follow in arrays of 4, one load for the group. */

/* Q4_K, 4 rows (q4k_r4): as q4k_r16 with 4 rows. Load h (0..3) of sub-block j holds values 4h .. 4h + 3
 * of the sub-block in its low nibbles and values 16 + 4h .. 16 + 4h + 3 in its high nibbles. */
typedef struct {
    uint16_t d[4], dmin[4];     /* f16, per row */
    uint8_t sc[8][4], mn[8][4]; /* 6-bit scale and min of sub-block j of row i at [j][i] */
    uint8_t qs[8][4][16];       /* [sub-block j][load h][4 * row + l] */
} woolly_block_q4k_r4;
_Static_assert(sizeof(woolly_block_q4k_r4) == 592, "Q4_K r4 block is 592 bytes");

/* Q6_K, 4 rows (q6k_r4), in slices of 32 values (slice j = Q6_K sub-blocks 2j and 2j + 1, the span of
 * one int8 activation block): load h (0..3) of slice j holds the low 4 bits of values 4h .. 4h + 3 of
 * the slice (sub-block 2j) in its low nibbles and of values 16 + 4h .. 16 + 4h + 3 (sub-block 2j + 1) in
 * its high nibbles; qh[j][0] holds, in bits 2h and 2h + 1 of byte 4i + l, the high 2 bits of value
 * 4h + l of row i, and qh[j][1] those of value 16 + 4h + l. Value = d * sc * (q - 32), as in
 * woolly_block_q6_k. Exactly Q6_K's 210 bytes per row. */
typedef struct {
    uint16_t d[4];        /* f16, per row */
    int8_t sc[16][4];     /* scale of sub-block s (16 values) of row i at [s][i] */
    uint8_t ql[8][4][16]; /* [slice j][load h][4 * row + l] */
    uint8_t qh[8][2][16]; /* [slice j][low/high nibble half][4 * row + l] */
} woolly_block_q6k_r4;
_Static_assert(sizeof(woolly_block_q6k_r4) == 840, "Q6_K r4 block is 840 bytes");

/* Q8_0, 4 rows (q80_r4): load h (0..7) holds values 4h .. 4h + 3 of each row. Value = d * q. Exactly
 * Q8_0's 34 bytes per row. */
typedef struct {
    uint16_t d[4];    /* f16, per row */
    int8_t qs[8][16]; /* [load h][4 * row + l] */
} woolly_block_q80_r4;
_Static_assert(sizeof(woolly_block_q80_r4) == 136, "Q8_0 r4 block is 136 bytes");

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block. */
static inline void woolly_k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *mn)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *mn = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* ---- half precision ----------------------------------------------------------------------------- */

static inline float woolly_bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t woolly_f32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* IEEE binary16 -> binary32, exact for every input (subnormals, inf, NaN included). */
static inline float woolly_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t man = h & 0x3FF;
    if (exp == 0x1F)
        return woolly_bits_to_f32(sign | 0x7F800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return woolly_bits_to_f32(sign);
        /* subnormal: value = man * 2^-24 */
        float f = (float)man * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    return woolly_bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

/* binary32 -> binary16, round to nearest even, overflow to inf, NaN kept NaN. */
static inline uint16_t woolly_f32_to_f16(float f)
{
    uint32_t x = woolly_f32_to_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u) /* inf or NaN */
        return (uint16_t)(sign | 0x7C00 | (ax > 0x7F800000u ? 0x200 : 0));
    if (ax >= 0x477FF000u) /* rounds to >= 65520: overflow */
        return (uint16_t)(sign | 0x7C00);
    if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (ax < 0x33000000u) /* below half the smallest subnormal */
            return (uint16_t)sign;
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7FFFFF) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax + 0xFFF + ((ax >> 13) & 1); /* round to nearest even at bit 13 */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

static inline float woolly_bf16_to_f32(uint16_t h) { return woolly_bits_to_f32((uint32_t)h << 16); }

/* ---- activation formats ------------------------------------------------------------------------- */

enum woolly_act {
    WOOLLY_ACT_F32 = 0, /* plain float rows */
    WOOLLY_ACT_F16 = 1, /* binary16 rows */
    WOOLLY_ACT_Q8 = 2,  /* int8 with one float scale per 32 values: woolly_block_q8x32 */
    WOOLLY_ACT_COUNT
};

/* One block of 32 int8 activations, x[i] ~ d * q[i] with d = max|x| / 127 and q = round(x / d) (ties
 * to even; d = 0 and q = 0 for an all-zero block). The sums save the kernels reductions: a K-quant's
 * min term needs d * sum(q) over the 32 (ds), Q6_K's offset of 32 the integer sum of each 16. */
typedef struct {
    float d;
    float ds;       /* d * (sum[0] + sum[1]) */
    int32_t sum[2]; /* sum of q[0..15], of q[16..31] */
    int8_t q[32];
} woolly_block_q8x32;
_Static_assert(sizeof(woolly_block_q8x32) == 48, "Q8 activation block is 48 bytes");

/* ---- kernel signatures ------------------------------------------------------------------------- */

enum woolly_op {
    WOOLLY_OP_GEMV = 0,
    WOOLLY_OP_GEMM = 1,
    WOOLLY_OP_ATTN = 2,
    WOOLLY_OP_PACK = 3,
};

typedef struct woolly_matmul_args {
    const void *w;      /* the weights, in the kernel's layout (see the top of this file) */
    size_t w_row_bytes;
    const void *x;      /* token t's activations at (const char *)x + t * x_row_bytes */
    size_t x_row_bytes;
    float *y;           /* y[t * y_stride + r] */
    size_t y_stride;
    int64_t k;          /* row length */
    int64_t m;          /* tokens */
    int64_t r0, r1;     /* weight rows computed by this call */
    int32_t accumulate; /* 0: y = x W^T; 1: y += x W^T (the runtime's K blocking) */
    int32_t prefetch;   /* bytes ahead in the weight stream to prefetch (0: none), for kernels that do */
} woolly_matmul_args;

typedef void (*woolly_matmul_fn)(const woolly_matmul_args *a);

/* Attention kernels keep their accumulators on the stack; models beyond these bounds are rejected at
 * load time. */
#define WOOLLY_MAX_HEAD_DIM 256
#define WOOLLY_MAX_GROUP 16

typedef struct woolly_attn_args {
    const float *q;     /* n_group query heads, head_dim floats each, q_stride floats apart */
    size_t q_stride;
    const void *k;      /* position p of this KV head at k + p * kv_stride elements (cache type) */
    const void *v;
    size_t kv_stride;
    int64_t n_kv;       /* visible positions, >= 1 */
    int64_t head_dim;
    int64_t n_group;
    float scale;        /* applied to q.k before the softmax */
    float *out;         /* n_group rows, out_stride floats apart */
    size_t out_stride;
} woolly_attn_args;

typedef void (*woolly_attn_fn)(const woolly_attn_args *a);

typedef void (*woolly_pack_fn)(const float *x, int64_t k, void *dst);

/* Repacking rows [r0, r1) of a GGUF-row matrix into a layout (r0 a multiple of the group; r1 the
 * matrix's row count or a multiple of the group: a partial last group is padded with zero rows), and
 * back (one row r, to GGUF's row format). */
typedef struct woolly_repack_args {
    const void *src;    /* GGUF rows, src_row_bytes apart */
    size_t src_row_bytes;
    void *dst;          /* the layout, with dst_row_bytes as the kernels' w_row_bytes */
    size_t dst_row_bytes;
    int64_t k;
    int64_t r0, r1;
} woolly_repack_args;

typedef void (*woolly_repack_fn)(const woolly_repack_args *a);
typedef void (*woolly_unpack_fn)(const void *w, size_t w_row_bytes, int64_t k, int64_t r, void *row);

#endif
