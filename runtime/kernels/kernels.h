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
 *           A layout has a kind (enum woolly_layout_kind), which says how a group's block (the weight
 *           format's block, in k, of each of the G rows) holds its values. Everything above (groups,
 *           blocks in k order, padding, r0, the two routines) holds for every kind, so the runtime
 *           repacks, caches and slices all kinds alike:
 *             row groups  WOOLLY_LAYOUT_ROW_GROUPS, every r<G> layout: re-encoded for vector loads that
 *                     hold a few consecutive values of every row of the group (the structs below).
 *             tiles   WOOLLY_LAYOUT_TILES, room for tile layouts (no layout of the spec has it yet, a
 *                     test's does; the amx level decodes the avx512 level's row groups into tiles):
 *                     the values K-interleaved in matrix tiles, tile row j holding values jI .. jI + I - 1
 *                     (I = 4 / element bytes: 4 for int8, 2 for BF16) of each of a tile's rows of W (16
 *                     for AMX, whose tile rows are 64 bytes; G is a multiple of it), so that one tile load
 *                     reads a weight operand in the order the tile multiply takes it; the block holds
 *                     its tiles, then its scales, as its struct says. Its kernels may need their level's
 *                     per-thread setup (below).
 *
 *   attn    flash attention (online softmax, no score matrix) of a block of queries over one KV head:
 *           the n_group query heads that share the KV head, for n_q consecutive queries at positions
 *           pos0 .. pos0 + n_q - 1. Query t sees the cache positions p with kv0 <= p < kv1 and
 *           p <= pos0 + t (the causal mask), and with a sliding window W (window > 0) p > pos0 + t - W
 *           (a window is a bound of the KV loop: a call's cost is O(W) per query at any depth). Softmax
 *           over scale * q.k, output the weighted sum of v. A ring cache (ring > 0, a multiple of
 *           WOOLLY_ATTN_RING_ALIGN) holds position p in row p % ring: the kernels walk KV blocks on the
 *           grid of whole multiples of their block size, so that no block crosses the ring's end (a tiled
 *           kernel may read, never weigh, the positions from its first one rounded down to its block).
 *           K and V are in the cache format: F16, F32, or Q8_0 blocks of 32 along the head dimension.
 *           A kernel tiles queries x KV positions (its q and KV block sizes, `tile_m` x `tile_n` in the
 *           registry, are its variant), masks per tile and skips the tiles above the diagonal. Its
 *           operand format (`act` in the registry) is F32, or BF16: the tiles round q, k, the
 *           probabilities and v to bfloat16 and sum in F32 (one query per call takes the F32 path).
 *           Final form (ml == NULL): every query sees at least one position (kv0 <= pos0, kv0 < kv1),
 *           out is the normalized result. Partial form (ml != NULL), for splitting one query's KV range
 *           across threads: out holds the unnormalized sum_p e^(s_p - m) v_p, ml the running maximum m
 *           and sum l = sum_p e^(s_p - m) of each (query, head) (m = -inf, l = 0, out = 0 when it sees
 *           nothing); woolly_attn_combine merges the partials of disjoint ranges into the final output.
 *
 *   pack    one row of k floats into an activation format (k a multiple of 32 for int8).
 *
 *   ops     the forward pass's small elementwise steps over n floats: swiglu (gate = silu(gate) * up),
 *           geglu (gate = gelu(gate) * up, GELU's tanh form) and rmsnorm (out = x / rms(x) * w), any
 *           n >= 1.
 *
 * Naming grammar, written down once:
 *   matmul  <weights>_<activations>_<op>_<isa>[_<layout>]_<tokens>x<rows>[_<variant>], e.g.
 *           q4k_f32_gemv_scalar_1x1 (weights q4k, activations f32, GEMV, ISA scalar, GGUF rows, tile
 *           1 token x 1 row), q4k_q8_gemm_avx512_r16_4x32 (16-row interleaved weights, 4 x 32 tile);
 *           the variant suffix names a template parameter other than the tile (an unroll, a prefetch).
 *   attn    attn_<kv type>_flash_<isa>_<d<head dim> or any>[_b<q block>x<KV block>][_bf16], e.g.
 *           attn_f16_flash_avx512_d64_b8x64 (F16 cache, head dim 64, 8 queries x 64 positions per tile);
 *           attn_f32_flash_scalar_any is the untiled reference for any head dimension, and the vector
 *           levels' _any (attn_f16_flash_avx2_any) the kernels of head dimensions without tiles; _bf16
 *           marks tiles with BF16 operands
 *   decode  attn_<kv type>_decode_<isa>_d<head dim>_k<KV block>[_fp16], e.g. attn_f16_decode_avx2_d64_k64:
 *           not a kernel but a part of several, the one-query path that every tiled attention kernel of
 *           that cache, ISA, head dimension and KV block calls (_fp16: P V in half precision, as the
 *           _fp16 tiles); int woolly_<name>(const woolly_attn_args *a) takes a call of one query of a
 *           group of 1 to 8 heads and returns 1, or returns 0 for a larger group. Not in the registry.
 *   pack    pack_<activations>_<isa>
 *   ops     ops_<op>_<isa>, e.g. ops_swiglu_avx512
 *   layout  <weights>_r<G>, its routines repack_<layout> and unpack_<layout>
 * The symbol is woolly_<name>, the file <name>.c. ISA tokens are dispatch levels, the spec's [isa.*]
 * entries (isa.h): scalar, avx2 (+FMA, F16C), avx512 (F/BW/VL/VNNI), neon (aarch64 + dot product), amx
 * (avx512 + AMX's int8 tiles); a kernel may also require features beyond its level (BF16, AVX-VNNI,
 * i8mm), checked at run time.
 *
 * Per-thread setup: a level may need per-thread state before its kernels run. The spec's `thread_init`
 * for the level names a function of type woolly_thread_init_fn; the runtime runs it, and that of every
 * level the active one nests in (the reference level's first), once on each thread before the thread's
 * first kernel: the thread pool on its workers and on the thread that runs a job (woolly_isa_thread_init,
 * isa.h). Code that calls kernels on a thread of its own, outside the pool (a test, a bench), calls
 * woolly_isa_thread_init first. The setup cannot fail: whatever can (the OS granting AMX's tile state)
 * belongs to the level's CPU check, the woolly_cpu fields its spec entry requires. No level of the spec
 * has one: the amx level's kernels load their tile configuration at entry (its tile shapes differ from
 * kernel to kernel) and release the tiles as their last step (amx_tiles.h). */
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

/* The 32-value formats besides Q8_0 (llama.cpp's "legacy" quants and IQ4_NL). Value j of a block (0..31)
 * has its low 4 bits in qs[j] (j < 16, low nibble) or qs[j - 16] (high nibble); Q5's fifth bit of value j
 * is bit j of qh read as a little-endian uint32. */
#define WOOLLY_QK4_0 32

/* value = d * (q - 8) */
typedef struct {
    uint16_t d;
    uint8_t qs[16];
} woolly_block_q4_0;
_Static_assert(sizeof(woolly_block_q4_0) == 18, "Q4_0 block is 18 bytes");

/* value = d * q + m */
typedef struct {
    uint16_t d, m;
    uint8_t qs[16];
} woolly_block_q4_1;
_Static_assert(sizeof(woolly_block_q4_1) == 20, "Q4_1 block is 20 bytes");

/* value = d * (q - 16), q 5 bits */
typedef struct {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
} woolly_block_q5_0;
_Static_assert(sizeof(woolly_block_q5_0) == 22, "Q5_0 block is 22 bytes");

/* value = d * q + m, q 5 bits */
typedef struct {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
} woolly_block_q5_1;
_Static_assert(sizeof(woolly_block_q5_1) == 24, "Q5_1 block is 24 bytes");

/* value = d * WOOLLY_IQ4NL_VALUES[q]: a non-linear 4-bit code */
typedef struct {
    uint16_t d;
    uint8_t qs[16];
} woolly_block_iq4_nl;
_Static_assert(sizeof(woolly_block_iq4_nl) == 18, "IQ4_NL block is 18 bytes");

/* The 16 levels of the IQ4 formats (IQ4_NL, IQ4_XS: GGUF's non-linear 4-bit grid, denser near zero), as
 * an initializer list (for the byte shuffles' tables too) and as a table. */
#define WOOLLY_IQ4NL_VALUES -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113
static const int8_t woolly_iq4nl_values[16] = {WOOLLY_IQ4NL_VALUES};

static inline int woolly_iq4nl_value(int q)
{
    return woolly_iq4nl_values[q & 15];
}

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

/* ---- Q2_K, Q3_K, IQ4_XS (GGUF's layouts) ---- */

/* 16 sub-blocks of 16; scales[j] holds sub-block j's 4-bit scale (low nibble) and 4-bit min (high);
 * value = d * sc * q - dmin * m with q 2 bits. Value v: byte qs[32 * (v / 128) + v % 32], bits
 * 2 * ((v / 32) % 4) .. +1. */
typedef struct {
    uint8_t scales[WOOLLY_QK_K / 16];
    uint8_t qs[WOOLLY_QK_K / 4];
    uint16_t d, dmin;
} woolly_block_q2_k;
_Static_assert(sizeof(woolly_block_q2_k) == 84, "Q2_K block is 84 bytes");

/* 16 sub-blocks of 16; 6-bit scales packed in `scales` (woolly_q3k_scale); value = d * (sc - 32) * (q - 4)
 * with q 3 bits: the low 2 as Q2_K's qs, the high bit of value v at hmask[v % 32], bit v / 32. */
typedef struct {
    uint8_t hmask[WOOLLY_QK_K / 8];
    uint8_t qs[WOOLLY_QK_K / 4];
    uint8_t scales[WOOLLY_K_SCALE_BYTES];
    uint16_t d;
} woolly_block_q3_k;
_Static_assert(sizeof(woolly_block_q3_k) == 110, "Q3_K block is 110 bytes");

/* 8 sub-blocks of 32; 6-bit scale of sub-block j: low 4 bits in scales_l[j / 2] (nibble j % 2), high 2
 * at bits 2j of scales_h; value = d * (sc - 32) * woolly_iq4nl_values[q] with q 4 bits: qs[16j + l]
 * holds value l of sub-block j in its low nibble and value 16 + l in its high nibble. */
typedef struct {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[WOOLLY_QK_K / 64];
    uint8_t qs[WOOLLY_QK_K / 2];
} woolly_block_iq4_xs;
_Static_assert(sizeof(woolly_block_iq4_xs) == 136, "IQ4_XS block is 136 bytes");

/* Q3_K's 6-bit scale of sub-block j (0..15), unsigned (the value's offset of 32 not applied): the low 4
 * bits in byte j % 8 (nibble j / 8), the high 2 in byte 8 + j % 4 at bits 2 * (j / 4). */
static inline int woolly_q3k_scale(int j, const uint8_t *scales)
{
    return ((scales[j % 8] >> (4 * (j / 8))) & 0xF) | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

/* IQ4_XS's 6-bit scale of sub-block j (0..7), unsigned. */
static inline int woolly_iq4xs_scale(int j, const woolly_block_iq4_xs *b)
{
    return ((b->scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((b->scales_h >> (2 * j)) & 3) << 4);
}

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

/* Q5_K with 16 rows interleaved (layout q5k_r16): as q4k_r16 for d, dmin, scales, mins and the low 4
 * bits; the fifth bit of sub-block j is in one 64-byte load, qh[j]: byte 4i + l holds, at bit 2h, that
 * of load h's low-nibble value (4h + l) and, at bit 2h + 1, that of its high-nibble value (16 + 4h + l).
 * Value = d * sc * q - dmin * mn with q 5 bits. */
typedef struct {
    uint16_t d[16], dmin[16];
    uint8_t sc[8][16], mn[8][16];
    uint8_t qh[8][64]; /* [sub-block j][4 * row + l] */
    uint8_t qs[8][4][64];
} woolly_block_q5k_r16;
_Static_assert(sizeof(woolly_block_q5k_r16) == 2880, "Q5_K r16 block is 2880 bytes");

/* Q6_K with 16 rows interleaved (layout q6k_r16): block b of a group is super-block b of each of its
 * 16 rows. Part p (0..7) is values 32p .. 32p + 31, the span of one int8 activation block. Its low 4
 * bits are arranged as in q4k_r16: load h (0..3) holds values 4h .. 4h + 3 of the part in its low
 * nibbles and 16 + 4h .. 16 + 4h + 3 in its high nibbles, row i's at bytes 4i .. 4i + 3, so the low
 * nibbles are 16-value sub-block 2p and the high nibbles sub-block 2p + 1. The high 2 bits are in two
 * 64-byte loads: byte 4i + l of qh[p][c] holds, from bit 0, 2 bits each of load 2c's low-nibble value,
 * its high-nibble value, load 2c + 1's low-nibble value and its high-nibble value. Value = d * sc * (q -
 * 32) with q 6 bits, as in woolly_block_q6_k. */
typedef struct {
    uint16_t d[16];       /* f16, per row */
    int8_t sc[16][16];    /* scale of 16-value sub-block j of row i at [j][i] */
    uint8_t ql[8][4][64]; /* [part p][load h][4 * row + l] */
    uint8_t qh[8][2][64]; /* [part p][load pair c][4 * row + l] */
} woolly_block_q6k_r16;
_Static_assert(sizeof(woolly_block_q6k_r16) == 3360, "Q6_K r16 block is 3360 bytes");

/* Q8_0 with 16 rows interleaved (layout q80_r16): block b of a group is block b (values 32b .. 32b + 31)
 * of each of its 16 rows; load h (0..7) holds values 4h .. 4h + 3 of each row (row i's at bytes 4i ..
 * 4i + 3), stored as q + 128 (unsigned), the operand vpdpbusd multiplies as unsigned. Value = d * q. */
typedef struct {
    uint16_t d[16];       /* f16, per row */
    uint8_t qs[8][64];    /* [load h][4 * row + l]: q + 128 */
} woolly_block_q80_r16;
_Static_assert(sizeof(woolly_block_q80_r16) == 544, "Q8_0 r16 block is 544 bytes");

/* F16 and BF16 with 16 rows interleaved (layouts f16_r16, bf16_r16): the formats' block is one value, so
 * a group's rows are read as one stream, column after column, where GGUF's rows are 16 streams
 * (bench/journal/2026-12-06-zen5-6.md). F16: block c of a group is value c of each of its 16 rows (row
 * i's at v[i]), the values as GGUF has them. BF16 in column pairs: blocks 2j and 2j + 1 are values 2j
 * and 2j + 1 of each row side by side (row i's pair at v[2i], v[2i + 1] of the two as one array), the
 * operand of vdpbf16ps; an odd k's last block is value k - 1 of each row (row i's at v[i]). */
typedef struct {
    uint16_t v[16];
} woolly_block_f16_r16;
typedef woolly_block_f16_r16 woolly_block_bf16_r16;
_Static_assert(sizeof(woolly_block_f16_r16) == 32, "F16 r16 block is 32 bytes");

/* The 32-value formats (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) with G rows interleaved (layouts q40_r<G> ..
 * iq4nl_r<G>, G = 4, 8, 16): block b of a group is block b of each of its G rows; load h (0..3) holds
 * values 4h .. 4h + 3 of each row in its low nibbles and values 16 + 4h .. 16 + 4h + 3 in its high
 * nibbles (row i's at bytes 4i .. 4i + 3: GGUF's qs bytes 4h .. 4h + 3 as they are). The Q5 formats' fifth
 * bits are in one load, qh: byte 4i + l holds, at bit 2h, that of value 4h + l of row i and, at bit
 * 2h + 1, that of value 16 + 4h + l (as in q5k_r8). Per-row d (and m) in arrays of G, f16. Exactly the
 * GGUF block's bytes per row. */
#define WOOLLY_LEGACY_NIBBLES_R(G) struct { uint16_t d[G]; uint8_t qs[4][4 * (G)]; }
#define WOOLLY_LEGACY_NIBBLES_MIN_R(G) struct { uint16_t d[G], m[G]; uint8_t qs[4][4 * (G)]; }
#define WOOLLY_LEGACY_NIBBLES_QH_R(G) struct { uint16_t d[G]; uint8_t qh[4 * (G)]; uint8_t qs[4][4 * (G)]; }
#define WOOLLY_LEGACY_NIBBLES_QH_MIN_R(G) \
    struct { uint16_t d[G], m[G]; uint8_t qh[4 * (G)]; uint8_t qs[4][4 * (G)]; }

typedef WOOLLY_LEGACY_NIBBLES_R(4) woolly_block_q40_r4;
typedef WOOLLY_LEGACY_NIBBLES_R(8) woolly_block_q40_r8;
typedef WOOLLY_LEGACY_NIBBLES_R(16) woolly_block_q40_r16;
typedef WOOLLY_LEGACY_NIBBLES_MIN_R(4) woolly_block_q41_r4;
typedef WOOLLY_LEGACY_NIBBLES_MIN_R(8) woolly_block_q41_r8;
typedef WOOLLY_LEGACY_NIBBLES_MIN_R(16) woolly_block_q41_r16;
typedef WOOLLY_LEGACY_NIBBLES_QH_R(4) woolly_block_q50_r4;
typedef WOOLLY_LEGACY_NIBBLES_QH_R(8) woolly_block_q50_r8;
typedef WOOLLY_LEGACY_NIBBLES_QH_R(16) woolly_block_q50_r16;
typedef WOOLLY_LEGACY_NIBBLES_QH_MIN_R(4) woolly_block_q51_r4;
typedef WOOLLY_LEGACY_NIBBLES_QH_MIN_R(8) woolly_block_q51_r8;
typedef WOOLLY_LEGACY_NIBBLES_QH_MIN_R(16) woolly_block_q51_r16;
typedef WOOLLY_LEGACY_NIBBLES_R(4) woolly_block_iq4nl_r4;
typedef WOOLLY_LEGACY_NIBBLES_R(8) woolly_block_iq4nl_r8;
typedef WOOLLY_LEGACY_NIBBLES_R(16) woolly_block_iq4nl_r16;
_Static_assert(sizeof(woolly_block_q40_r8) == 8 * 18 && sizeof(woolly_block_q41_r8) == 8 * 20 &&
                   sizeof(woolly_block_q50_r8) == 8 * 22 && sizeof(woolly_block_q51_r8) == 8 * 24 &&
                   sizeof(woolly_block_q51_r4) == 4 * 24 && sizeof(woolly_block_q51_r16) == 16 * 24,
               "the 32-value layouts hold exactly the GGUF blocks' bytes");

/* The 8-row layouts (q4k_r8, q5k_r8, q6k_r8, q80_r8): the shape of q4k_r16 for 256-bit registers. One
 * 32-byte load of quants holds 4 consecutive values of each of the 8 rows (row i's at bytes 4i .. 4i + 3),
 * the shape of one vpmaddubsw/vpdpbusd operand against 4 broadcast activation bytes; per-row scales
 * follow in arrays of 8, so that one load gives the scale of every row of the group. */

/* Q4_K, 8 rows (q4k_r8): as q4k_r16 with 8 rows. Load h (0..3) of sub-block j holds values 4h .. 4h + 3
 * of the sub-block in its low nibbles and values 16 + 4h .. 16 + 4h + 3 in its high nibbles. */
typedef struct {
    uint16_t d[8], dmin[8];     /* f16, per row */
    uint8_t sc[8][8], mn[8][8]; /* 6-bit scale and min of sub-block j of row i at [j][i] */
    uint8_t qs[8][4][32];       /* [sub-block j][load h][4 * row + l] */
} woolly_block_q4k_r8;
_Static_assert(sizeof(woolly_block_q4k_r8) == 1184, "Q4_K r8 block is 1184 bytes");

/* Q5_K, 8 rows (q5k_r8): q4k_r8's low 4 bits, plus the fifth bits of sub-block j in sub[j].qh: byte
 * 4i + l holds, in bit 2h, the fifth bit of value 4h + l of row i, and in bit 2h + 1 that of value
 * 16 + 4h + l (the two values whose low bits share byte 4i + l of load h). A sub-block's bytes are
 * contiguous, so the quants stream in one sequential pass. */
typedef struct {
    uint16_t d[8], dmin[8];
    uint8_t sc[8][8], mn[8][8];
    struct {
        uint8_t qh[32];    /* [4 * row + l] */
        uint8_t qs[4][32]; /* [load h][4 * row + l], as in q4k_r8 */
    } sub[8];
} woolly_block_q5k_r8;
_Static_assert(sizeof(woolly_block_q5k_r8) == 1440, "Q5_K r8 block is 1440 bytes");

/* Q6_K, 8 rows (q6k_r8), in slices of 32 values (slice j = Q6_K sub-blocks 2j and 2j + 1): load h (0..3)
 * of slice j holds the low 4 bits of values 4h .. 4h + 3 of the slice (sub-block 2j) in its low nibbles
 * and of values 16 + 4h .. 16 + 4h + 3 (sub-block 2j + 1) in its high nibbles; qh[0] holds, in bits
 * 2h and 2h + 1 of byte 4i + l, the high 2 bits of value 4h + l of row i, and qh[1] those of value
 * 16 + 4h + l. Value = d * sc * (q - 32), as in woolly_block_q6_k. A slice's bytes are contiguous (one
 * sequential pass over the quants); exactly Q6_K's 210 bytes per row. */
typedef struct {
    uint16_t d[8];    /* f16, per row */
    int8_t sc[16][8]; /* scale of sub-block s (16 values) of row i at [s][i] */
    struct {
        uint8_t ql[4][32]; /* [load h][4 * row + l] */
        uint8_t qh[2][32]; /* [low/high nibble half][4 * row + l] */
    } slice[8];
} woolly_block_q6k_r8;
_Static_assert(sizeof(woolly_block_q6k_r8) == 1680, "Q6_K r8 block is 1680 bytes");

/* Q8_0, 8 rows (q80_r8): load h (0..7) holds values 4h .. 4h + 3 of each row. Exactly Q8_0's 34 bytes
 * per row. */
typedef struct {
    uint16_t d[8];      /* f16, per row */
    int8_t qs[8][32];   /* [load h][4 * row + l] */
} woolly_block_q80_r8;
_Static_assert(sizeof(woolly_block_q80_r8) == 272, "Q8_0 r8 block is 272 bytes");

/* ---- Q2_K, Q3_K and IQ4_XS with G = 4, 8 or 16 rows interleaved (layouts q2k_r<G>, q3k_r<G>,
 * iq4xs_r<G>), in slices of 32 values (slice j: values 32j .. 32j + 31, the span of one int8 activation
 * block; for Q2_K and Q3_K the 16-value sub-blocks 2j and 2j + 1). As in the layouts above, a load of
 * 4G bytes holds 4 values of each row, row i's at bytes 4i .. 4i + 3, and "load h" (0..3) of a slice
 * means its values 4h .. 4h + 3 (the low half) and 16 + 4h .. 16 + 4h + 3 (the high half).
 *
 * Q2_K: qs[j][0] holds at bits 2h .. 2h + 1 of byte 4i + l the 2-bit value 4h + l of row i, qs[j][1]
 * that of value 16 + 4h + l; sm[s][i] is the Q2_K scale byte of sub-block s (scale in the low nibble, min
 * in the high). Value = d * sc * q - dmin * m. Exactly Q2_K's 84 bytes per row.
 * Q3_K: the low 2 bits of the 3-bit q + 4 as Q2_K's qs (ql), and in qh the high bit of value 4h + l at
 * bit h, of value 16 + 4h + l at bit 4 + h; sc[s][i] = Q3_K's scale - 32. Value = d * sc * q.
 * IQ4_XS: load h of slice j holds the 4-bit indices of values 4h + l in its low nibbles and of 16 + 4h + l
 * in its high nibbles; sc[j][i] = IQ4_XS's scale - 32. Value = d * sc * woolly_iq4nl_values[index]. */
#define WOOLLY_Q23K_LAYOUTS(G)                                                                             \
    typedef struct {                                                                                       \
        uint16_t d[G], dmin[G]; /* f16, per row */                                                         \
        uint8_t sm[16][G];      /* scale (low nibble) and min (high) of sub-block s of row i at [s][i] */  \
        uint8_t qs[8][2][4 * G];                                                                           \
    } woolly_block_q2k_r##G;                                                                               \
    typedef struct {                                                                                       \
        uint16_t d[G];     /* f16, per row */                                                              \
        int8_t sc[16][G]; /* scale - 32 of sub-block s of row i at [s][i] */                              \
        struct {                                                                                           \
            uint8_t ql[2][4 * G]; /* [low/high half][4 * row + l] */                                       \
            uint8_t qh[4 * G];                                                                             \
        } slice[8];                                                                                        \
    } woolly_block_q3k_r##G;                                                                               \
    typedef struct {                                                                                       \
        uint16_t d[G];            /* f16, per row */                                                       \
        int8_t sc[8][G];          /* scale - 32 of sub-block j of row i at [j][i] */                       \
        uint8_t qs[8][4][4 * G];  /* [slice j][load h][4 * row + l] */                                     \
    } woolly_block_iq4xs_r##G;
WOOLLY_Q23K_LAYOUTS(4)
WOOLLY_Q23K_LAYOUTS(8)
WOOLLY_Q23K_LAYOUTS(16)
#undef WOOLLY_Q23K_LAYOUTS
_Static_assert(sizeof(woolly_block_q2k_r8) == 8 * 84, "Q2_K r8 block is Q2_K's bytes");
_Static_assert(sizeof(woolly_block_q2k_r16) == 16 * 84 && sizeof(woolly_block_q2k_r4) == 4 * 84, "Q2_K layouts");
_Static_assert(sizeof(woolly_block_q3k_r8) == 912, "Q3_K r8 block is 912 bytes");
_Static_assert(sizeof(woolly_block_iq4xs_r8) == 1104, "IQ4_XS r8 block is 1104 bytes");
_Static_assert(sizeof(woolly_block_q3k_r4) == 456 && sizeof(woolly_block_iq4xs_r16) == 2208, "layout sizes");

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
    if (ax < 0x38800000u) {   /* below the smallest normal half: subnormal or zero */
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

static inline float woolly_bf16_to_f32(uint16_t h)
{
    return woolly_bits_to_f32((uint32_t)h << 16);
}

/* binary32 -> bfloat16, round to nearest even (overflow to inf, subnormals kept), NaN kept NaN (quiet). */
static inline uint16_t woolly_f32_to_bf16(float f)
{
    const uint32_t x = woolly_f32_to_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1)) >> 16);
}

/* ---- activation formats ------------------------------------------------------------------------- */

enum woolly_act {
    WOOLLY_ACT_F32 = 0,  /* plain float rows */
    WOOLLY_ACT_F16 = 1,  /* binary16 rows */
    WOOLLY_ACT_Q8 = 2,   /* int8 with one float scale per 32 values: woolly_block_q8x32 */
    WOOLLY_ACT_BF16 = 3, /* bfloat16 rows (woolly_f32_to_bf16), for the vdpbf16ps kernels */
    WOOLLY_ACT_Q8K = 4,  /* int8 with one float scale per 256 values: woolly_block_q8x256 */
    WOOLLY_ACT_COUNT,    /* the formats above are the ones matmuls take */
    /* int16 with a float scale per row, the vpmaddwd attention tiles' operands: no matmul takes them,
     * so they stay out of the loops over WOOLLY_ACT_COUNT */
    WOOLLY_ACT_I16 = WOOLLY_ACT_COUNT,
};

/* One block of 32 int8 activations, x[i] ~ d * q[i] with d = max|x| / 127 and q = round(x / d) (ties
 * to even; d = 0 and q = 0 for an all-zero block). The other fields save the kernels reductions: a
 * K-quant's min term needs d * sum(q) over the 32 (ds); Q6_K's offset of 32 takes -32 x the integer sum
 * of each 16 (off), where its dot products start, loaded as it is (the sums themselves are -off / 32). */
typedef struct {
    float d;
    float ds;       /* d * (sum of the 32 q) */
    int32_t off[2]; /* -32 x (sum of q[0..15]), -32 x (sum of q[16..31]) */
    int8_t q[32];
} woolly_block_q8x32;
_Static_assert(sizeof(woolly_block_q8x32) == 48, "Q8 activation block is 48 bytes");

/* One block of 256 int8 activations, x[i] ~ d * q[i] with d = max|x| / 127 over the 256 (rounded as in
 * woolly_block_q8x32). One scale per K-quant super-block lets a kernel apply the weights' sub-block scales
 * to integers: Q4_K's d * sc * q becomes the integer sc * q times d, summed over the whole super-block
 * before one float step. sum[j] is the integer sum of q[32j .. 32j + 31], for the min term (dmin * mn *
 * sum). The quants start at byte 64, so that 64 of them are one cache line. */
typedef struct {
    float d;
    int16_t sum[8];
    uint8_t pad[44];
    int8_t q[256];
} woolly_block_q8x256;
_Static_assert(sizeof(woolly_block_q8x256) == 320, "Q8K activation block is 320 bytes");

/* ---- kernel signatures ------------------------------------------------------------------------- */

enum woolly_op {
    WOOLLY_OP_GEMV = 0,
    WOOLLY_OP_GEMM = 1,
    WOOLLY_OP_ATTN = 2,
    WOOLLY_OP_PACK = 3,
    WOOLLY_OP_SWIGLU = 4, /* ops */
    WOOLLY_OP_RMSNORM = 5,
    WOOLLY_OP_GEGLU = 6,
};
enum { WOOLLY_OP_KINDS = WOOLLY_OP_GEGLU + 1 }; /* the last one's, + 1: a table per kind */

typedef struct woolly_matmul_args {
    const void *w; /* the weights, in the kernel's layout (see the top of this file) */
    size_t w_row_bytes;
    const void *x; /* token t's activations at (const char *)x + t * x_row_bytes */
    size_t x_row_bytes;
    float *y; /* y[t * y_stride + r] */
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
/* A ring cache's rows are a multiple of this: every KV block size the kernels use divides it. */
#define WOOLLY_ATTN_RING_ALIGN 128

/* Partial results woolly_attn_combine merges at most. */
#define WOOLLY_ATTN_MAX_PARTS 64

typedef struct woolly_attn_args {
    const float *q; /* query t, head g at q + t * q_row_stride + g * q_stride (head_dim floats) */
    size_t q_stride, q_row_stride;
    const void *k; /* position p of this KV head at (const char *)k + p * kv_row_bytes */
    const void *v;
    size_t kv_row_bytes;
    int64_t n_q;      /* queries, >= 1 */
    int64_t pos0;     /* position of query 0 (the causal mask) */
    int64_t kv0, kv1; /* the cache positions this call reads */
    int64_t window;   /* 0: none; else query t sees only positions > pos0 + t - window */
    int64_t ring;     /* 0: position p at row p; else row p % ring (a multiple of WOOLLY_ATTN_RING_ALIGN) */
    int64_t head_dim; /* <= WOOLLY_MAX_HEAD_DIM; a multiple of 32 for a Q8_0 cache */
    int64_t n_group;  /* <= WOOLLY_MAX_GROUP */
    float scale;      /* applied to q.k before the softmax */
    float *out;       /* query t, head g at out + t * out_row_stride + g * out_stride */
    size_t out_stride, out_row_stride;
    float *ml; /* NULL, or the partial form: m, l of query t, head g at ml[2 * (t * n_group + g)] */
    /* 0: a call of one query may take a faster path of its own (decode), whose numbers can differ from
     * the tiles' by their rounding of the operands. 1: it takes the tiles like any other: a prompt's
     * token, whose logits must not depend on how the prompt was cut into calls. */
    int32_t one_query_tiles;
    /* The one-query path's prefetch of K and V into L2, in KV blocks ahead: 0 its own distance
     * (templates/attn/decode.c.j2), WOOLLY_ATTN_NO_L2_PREFETCH none (a CPU class that streams the cache
     * faster without it: woolly_kernel_attn_decode_l2), else that many blocks. F16 and F32 caches: a
     * Q8_0 cache's path has no L2 prefetch. */
    int32_t decode_l2_blocks;
} woolly_attn_args;

#define WOOLLY_ATTN_NO_L2_PREFETCH (-1)
/* The most blocks ahead a class profile may set (attn-decode-l2-ahead). */
#define WOOLLY_ATTN_MAX_L2_BLOCKS 16

typedef void (*woolly_attn_fn)(const woolly_attn_args *a);

/* Merges n <= WOOLLY_ATTN_MAX_PARTS partial results of one (query, head) over disjoint KV ranges (out[i]:
 * head_dim unnormalized floats, ml[i]: its m and l) into the normalized output dst. At least one part has
 * seen a position. */
static inline void woolly_attn_combine(int n, const float *const *out, const float *const *ml,
                                       int64_t head_dim, float *dst)
{
    float m = ml[0][0];
    for (int i = 1; i < n; i++)
        m = ml[i][0] > m ? ml[i][0] : m;
    float l = 0.0f, w[WOOLLY_ATTN_MAX_PARTS];
    for (int i = 0; i < n; i++) {
        w[i] = ml[i][1] > 0.0f ? __builtin_expf(ml[i][0] - m) : 0.0f;
        l += w[i] * ml[i][1];
    }
    const float inv = 1.0f / l;
    for (int64_t d = 0; d < head_dim; d++) {
        float s = 0.0f;
        for (int i = 0; i < n; i++)
            s += w[i] * out[i][d];
        dst[d] = s * inv;
    }
}

typedef void (*woolly_pack_fn)(const float *x, int64_t k, void *dst);

typedef void (*woolly_swiglu_fn)(float *gate, const float *up, int64_t n);
typedef void (*woolly_geglu_fn)(float *gate, const float *up, int64_t n);
typedef void (*woolly_rmsnorm_fn)(float *out, const float *x, const float *w, int64_t n, float eps);

/* Repacking rows [r0, r1) of a GGUF-row matrix into a layout (r0 a multiple of the group; r1 the
 * matrix's row count or a multiple of the group: a partial last group is padded with zero rows), and
 * back (one row r, to GGUF's row format). */
typedef struct woolly_repack_args {
    const void *src; /* GGUF rows, src_row_bytes apart */
    size_t src_row_bytes;
    void *dst; /* the layout, with dst_row_bytes as the kernels' w_row_bytes */
    size_t dst_row_bytes;
    int64_t k;
    int64_t r0, r1;
} woolly_repack_args;

typedef void (*woolly_repack_fn)(const woolly_repack_args *a);
typedef void (*woolly_unpack_fn)(const void *w, size_t w_row_bytes, int64_t k, int64_t r, void *row);

/* How a layout holds a group's block ("weight layouts" at the top). */
enum woolly_layout_kind {
    WOOLLY_LAYOUT_ROW_GROUPS = 0, /* vector loads of a few consecutive values of every row */
    WOOLLY_LAYOUT_TILES = 1,      /* K-interleaved matrix tiles */
};

/* A level's per-thread setup ("per-thread setup" at the top). */
typedef void (*woolly_thread_init_fn)(void);

#endif
