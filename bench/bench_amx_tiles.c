/* What the AMX tile unit costs per product in the shapes the amx level's GEMMs use, on this CPU: a step
 * of 2 x 2 accumulator tiles (2 A tiles of 16 tokens, 2 B tiles of 16 rows), from zero, over K = 32
 * activation bytes (a chunk of one scale: what the kernels run) or 64 (a whole tile row), with each
 * product stored to memory (as the kernels must, to scale it in float; to a ring of two chunks' tiles,
 * in the L1 cache as the kernels' are) or kept in the tile, and stored products read back with vector
 * loads at once or a step later. Single thread, by CPU time (bench_cpu_time.h), median of 7 samples. It
 * prints GMAC/s per case; comparing them shows what the store, its read-back and a half-filled A tile
 * cost. Only on x86-64 CPUs with AMX. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench_cpu_time.h"
#include "cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "amx_tiles.h"

enum { CHUNKS = 32, STEPS = 64 };

typedef struct {
    int k;     /* activation bytes per A row: 32 or 64 */
    int store; /* store each product */
    int read;  /* 0: nothing; 1: read each product's 64 vectors back right after its store (and add them
                  up, the float steps' loads); 2: read the step before's instead, one step later */
} tile_case;

static _Alignas(64) int8_t g_a[CHUNKS + 1][16][64];
static _Alignas(64) uint8_t g_b[CHUNKS + 1][16][64];
static _Alignas(64) int32_t g_dots[2][4][16][16];
static __m512i g_sum; /* what the reads add up, so that they stay */

/* STEPS steps of the 2 x 2 tiles over the CHUNKS chunks' operands. */
__attribute__((target("amx-tile,amx-int8,avx512f"))) static void run(void *ctx)
{
    const tile_case *c = ctx;
    woolly_tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 4; i++)
        cfg.rows[i] = 16, cfg.colsb[i] = 64;
    cfg.rows[4] = cfg.rows[5] = 16, cfg.colsb[4] = cfg.colsb[5] = (uint16_t)c->k;
    cfg.rows[6] = cfg.rows[7] = (uint8_t)(c->k / 4), cfg.colsb[6] = cfg.colsb[7] = 64;
    _tile_loadconfig(&cfg);
    for (int s = 0; s < STEPS; s++) {
        const int q = s % CHUNKS;
        _tile_loadd(4, g_a[q], 64);
        _tile_loadd(5, g_a[q + 1], 64);
        _tile_loadd(6, g_b[q], 64);
        _tile_loadd(7, g_b[q + 1], 64);
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        _tile_dpbsud(0, 4, 6);
        _tile_dpbsud(1, 4, 7);
        _tile_dpbsud(2, 5, 6);
        _tile_dpbsud(3, 5, 7);
        if (c->store) {
            _tile_stored(0, g_dots[q % 2][0], 64);
            _tile_stored(1, g_dots[q % 2][1], 64);
            _tile_stored(2, g_dots[q % 2][2], 64);
            _tile_stored(3, g_dots[q % 2][3], 64);
        }
        if (c->read && (c->read == 1 || s > 0)) {
            const int32_t(*d)[16][16] = g_dots[c->read == 1 ? q % 2 : (q + 1) % 2];
            __m512i v = g_sum;
            for (int i = 0; i < 4; i++)
                for (int r = 0; r < 16; r++)
                    v = _mm512_add_epi32(v, _mm512_load_si512(d[i][r]));
            g_sum = v;
        }
    }
    if (!c->store)
        _tile_stored(0, g_dots[0][0], 64);
    _tile_release();
}

int main(void)
{
    const woolly_cpu *cpu = woolly_cpu_get();
    if (!cpu->amx_int8) {
        fprintf(stderr, "bench_amx_tiles: this CPU has no AMX int8 tiles (or the OS refuses their state)\n");
        return 1;
    }
    memset(g_a, 3, sizeof g_a);
    memset(g_b, 5, sizeof g_b);
    printf("| K (bytes per A row) | products stored | read back | ns per 2 x 2 step | GMAC/s (1 thread) |\n"
           "| --- | --- | --- | --- | --- |\n");
    static const char *const READ[] = {"no", "at once", "a step later"};
    const tile_case cases[] = {{32, 1, 0}, {32, 0, 0}, {64, 1, 0}, {64, 0, 0}, {32, 1, 1}, {32, 1, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tile_case c = cases[i];
        const double s = bench_cpu_time(run, &c, 0.05, 7) / STEPS;
        printf("| %d | %s | %s | %.1f | %.1f |\n", c.k, c.store ? "yes" : "no", READ[c.read], s * 1e9,
               4.0 * 16 * 16 * c.k / s * 1e-9);
    }
    return 0;
}
#else
int main(void)
{
    fprintf(stderr, "bench_amx_tiles: AMX is an x86-64 feature\n");
    return 1;
}
#endif
