/* A prototype, not a kernel of the registry: Q4_K x int8 on AMX tiles with one activation scale per
 * 256 values (a super-block), so that the tile sums run over a whole super-block instead of being stored
 * and scaled every 32 values as the amx level's GEMMs must with the 32-value activation blocks. It
 * measures what that arrangement reaches on this CPU, beside `bench_matmul` on the same shape.
 *
 * The sub-block scale sc (6 bits) is folded into the B tiles: q sc <= 945 does not fit a byte, so B_lo
 * holds q (sc & 15) and B_hi q (sc >> 4), and the super-block's integer dot is C_lo + 16 C_hi: two
 * accumulator tiles per output tile, TDPBUSD over 64 values each, two stores per super-block. The min term
 * takes the activations' sums per 32 (int16) against the mins, by vpdpwssd. Tiles: 2 token tiles x 1
 * group of 16 rows x (lo, hi) = 4 accumulators, 2 A, 2 B. The weights of a panel of 1024 values are
 * decoded once per 128 tokens, as in the amx kernels; the decode here is plain C (its share is printed).
 *
 * Single thread, CPU time, median of 5; checks every output against a double-precision sum of the same
 * integers and scales. Only on x86-64 CPUs with AMX. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cpu_time.h"
#include "cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "amx_tiles.h"

enum { QK = 256, SUBS = 8, KB = 4, TS = 128 };

/* 16 rows' super-block: the r16 idea with the values one per byte, for the prototype's simplicity. */
typedef struct {
    float d[16], dmin[16];
    uint8_t sc[SUBS][16], mn[SUBS][16];
    uint8_t q[QK / 4][16][4]; /* [k / 4][row][k % 4], values 0..15 */
} wgroup;

/* A token's super-block: q ~ x / dx, and the sums of q per 32. */
typedef struct {
    _Alignas(64) int8_t q[QK]; /* first and aligned: an A tile's rows are whole cache lines (in turns on
                                  the Xeon, 121-159 GMAC/s against 74-138 with q after dx and bsum) */
    float dx;
    int16_t bsum[SUBS];
} xblock;

/* A super-block of a panel: per 64 values B_lo and B_hi (16 tile rows of 16 x 4 bytes), the mins as int16
 * pairs for vpdpwssd (pair p: lane r holds mn[2p][r], mn[2p + 1][r]), d and dmin. */
typedef struct {
    _Alignas(64) uint8_t lo[4][16][64], hi[4][16][64];
    _Alignas(64) int16_t mins[4][32];
    _Alignas(64) float d[16], dmin[16];
} pblock;

typedef struct {
    int m, n, k;
    const wgroup *w; /* [n / 16][k / 256] */
    const xblock *x; /* [m][k / 256] */
    float *y;        /* [m][n] */
    double fill_s;
} problem;

static void fill(const problem *p, int g, int b0, int nb, pblock *pan)
{
    for (int bi = 0; bi < nb; bi++) {
        const wgroup *w = &p->w[(size_t)g * (p->k / QK) + b0 + bi];
        pblock *pb = &pan[bi];
        for (int c = 0; c < 4; c++)
            for (int kk = 0; kk < 16; kk++) {
                const int j = (64 * c + 4 * kk) / 32;
                for (int r = 0; r < 16; r++)
                    for (int i = 0; i < 4; i++) {
                        const int q = w->q[16 * c + kk][r][i];
                        pb->lo[c][kk][4 * r + i] = (uint8_t)(q * (w->sc[j][r] & 15));
                        pb->hi[c][kk][4 * r + i] = (uint8_t)(q * (w->sc[j][r] >> 4));
                    }
            }
        for (int pp = 0; pp < 4; pp++)
            for (int r = 0; r < 16; r++)
                pb->mins[pp][2 * r] = w->mn[2 * pp][r], pb->mins[pp][2 * r + 1] = w->mn[2 * pp + 1][r];
        memcpy(pb->d, w->d, sizeof pb->d);
        memcpy(pb->dmin, w->dmin, sizeof pb->dmin);
    }
}

__attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vnni"))) static void run(void *ctx)
{
    problem *p = ctx;
    const int nbk = p->k / QK;
    const size_t xrow = (size_t)nbk * sizeof(xblock);
    woolly_tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++)
        cfg.rows[i] = 16, cfg.colsb[i] = 64;
    _tile_loadconfig(&cfg);
    static _Alignas(64) pblock pan[KB];
    static _Alignas(64) int32_t dots[KB][4][16][16]; /* [super-block][C0lo C0hi C1lo C1hi] */
    static _Alignas(64) __m512 acc[TS];
    double fill_s = 0;
    for (int g = 0; g < p->n / 16; g++)
        for (int ts = 0; ts < p->m; ts += TS) {
            for (int b0 = 0; b0 < nbk; b0 += KB) {
                const int nb = nbk - b0 < KB ? nbk - b0 : KB;
                const double f0 = bench_cpu_now_s();
                fill(p, g, b0, nb, pan);
                fill_s += bench_cpu_now_s() - f0;
                for (int t0 = ts; t0 < ts + TS && t0 < p->m; t0 += 32) {
                    const xblock *x0 = (const xblock *)((const char *)p->x + (size_t)t0 * xrow);
                    const xblock *x1 = (const xblock *)((const char *)p->x + (size_t)(t0 + 16) * xrow);
                    for (int bi = 0; bi < nb; bi++) {
                        _tile_zero(0);
                        _tile_zero(1);
                        _tile_zero(2);
                        _tile_zero(3);
                        for (int c = 0; c < 4; c++) {
                            _tile_loadd(4, x0[b0 + bi].q + 64 * c, xrow);
                            _tile_loadd(5, x1[b0 + bi].q + 64 * c, xrow);
                            _tile_loadd(6, pan[bi].lo[c], 64);
                            _tile_loadd(7, pan[bi].hi[c], 64);
                            _tile_dpbsud(0, 4, 6);
                            _tile_dpbsud(1, 4, 7);
                            _tile_dpbsud(2, 5, 6);
                            _tile_dpbsud(3, 5, 7);
                        }
                        _tile_stored(0, dots[bi][0], 64);
                        _tile_stored(1, dots[bi][1], 64);
                        _tile_stored(2, dots[bi][2], 64);
                        _tile_stored(3, dots[bi][3], 64);
                    }
                    for (int t = 0; t < 32; t++) {
                        const xblock *x = (const xblock *)((const char *)p->x + (size_t)(t0 + t) * xrow) + b0;
                        const int u = t / 16, r = t % 16;
                        __m512 a = b0 == 0 ? _mm512_setzero_ps() : acc[t0 - ts + t];
                        for (int bi = 0; bi < nb; bi++) {
                            const __m512i lo = _mm512_load_si512(dots[bi][2 * u][r]);
                            const __m512i hi = _mm512_load_si512(dots[bi][2 * u + 1][r]);
                            const __m512 dot = _mm512_cvtepi32_ps(_mm512_add_epi32(lo, _mm512_slli_epi32(hi, 4)));
                            int32_t bs[4];
                            memcpy(bs, x[bi].bsum, sizeof bs);
                            __m512i mi = _mm512_setzero_si512();
                            for (int pp = 0; pp < 4; pp++)
                                mi = _mm512_dpwssd_epi32(mi, _mm512_load_si512(pan[bi].mins[pp]), _mm512_set1_epi32(bs[pp]));
                            const __m512 dx = _mm512_set1_ps(x[bi].dx);
                            const __m512 s = _mm512_fmsub_ps(dot, _mm512_load_ps(pan[bi].d),
                                                             _mm512_mul_ps(_mm512_cvtepi32_ps(mi), _mm512_load_ps(pan[bi].dmin)));
                            a = _mm512_fmadd_ps(s, dx, a);
                        }
                        acc[t0 - ts + t] = a;
                    }
                }
            }
            for (int t = ts; t < ts + TS && t < p->m; t++)
                _mm512_storeu_ps(p->y + (size_t)t * p->n + 16 * g, acc[t - ts]);
        }
    _tile_release();
    p->fill_s += fill_s;
}

static uint64_t rng = 0x9E3779B97F4A7C15u;
static uint32_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

int main(int argc, char **argv)
{
    if (!woolly_cpu_get()->amx_int8) {
        fprintf(stderr, "bench_amx_q4k_sb: this CPU has no AMX int8 tiles (or the OS refuses their state)\n");
        return 1;
    }
    problem p = {.m = 512, .n = 2048, .k = 2048};
    if (argc == 4)
        p.m = atoi(argv[1]), p.n = atoi(argv[2]), p.k = atoi(argv[3]);
    if (p.m % 32 || p.n % 16 || p.k % 1024 || p.m <= 0 || p.n <= 0) {
        fprintf(stderr, "usage: bench_amx_q4k_sb [TOKENS ROWS COLS] (multiples of 32, 16 and 1024)\n");
        return 2;
    }
    const int nbk = p.k / QK;
    wgroup *w = aligned_alloc(64, sizeof(wgroup) * (size_t)(p.n / 16) * nbk);
    xblock *x = aligned_alloc(64, sizeof(xblock) * (size_t)p.m * nbk);
    p.y = aligned_alloc(64, sizeof(float) * (size_t)p.m * p.n);
    for (size_t i = 0; i < (size_t)(p.n / 16) * nbk; i++) {
        for (int r = 0; r < 16; r++) {
            w[i].d[r] = (float)(next() % 1000) * 1e-5f, w[i].dmin[r] = (float)(next() % 1000) * 1e-5f;
            for (int j = 0; j < SUBS; j++)
                w[i].sc[j][r] = (uint8_t)(next() % 64), w[i].mn[j][r] = (uint8_t)(next() % 64);
        }
        for (int k = 0; k < QK / 4; k++)
            for (int r = 0; r < 16; r++)
                for (int l = 0; l < 4; l++)
                    w[i].q[k][r][l] = (uint8_t)(next() % 16);
    }
    for (size_t i = 0; i < (size_t)p.m * nbk; i++) {
        x[i].dx = (float)(next() % 1000 + 1) * 1e-4f;
        for (int j = 0; j < SUBS; j++) {
            int s = 0;
            for (int l = 0; l < 32; l++)
                s += x[i].q[32 * j + l] = (int8_t)(next() % 255 - 127);
            x[i].bsum[j] = (int16_t)s;
        }
    }
    p.w = w, p.x = x;
    run(&p);
    double worst = 0;
    for (int t = 0; t < p.m; t += 7)
        for (int rr = 0; rr < p.n; rr += 5) {
            double want = 0, mag = 0;
            for (int b = 0; b < nbk; b++) {
                const wgroup *wg = &w[(size_t)(rr / 16) * nbk + b];
                const xblock *xb = &x[(size_t)t * nbk + b];
                const int r = rr % 16;
                double s = 0, m = 0;
                for (int k = 0; k < QK; k++)
                    s += (double)wg->sc[k / 32][r] * wg->q[k / 4][r][k % 4] * xb->q[k];
                for (int j = 0; j < SUBS; j++)
                    m += (double)wg->mn[j][r] * xb->bsum[j];
                want += xb->dx * (wg->d[r] * s - wg->dmin[r] * m);
                mag += fabs(xb->dx * wg->d[r] * s) + fabs(xb->dx * wg->dmin[r] * m);
            }
            const double e = fabs(p.y[(size_t)t * p.n + rr] - want) / (mag > 0 ? mag : 1);
            worst = e > worst ? e : worst;
        }
    const double s = bench_cpu_time(run, &p, 0.2, 5);
    p.fill_s = 0;
    run(&p); /* the decode's share of one call */
    const double macs = (double)p.m * p.n * p.k;
    printf("Q4_K x int8, one activation scale per 256, AMX tiles (prototype), %d tokens x %dx%d, 1 thread: %.1f GMAC/s "
           "(%.0f us a call); without its plain-C panel decode (%.0f us) %.1f GMAC/s; largest error relative to "
           "the sum of magnitudes %.1e\n",
           p.m, p.n, p.k, macs / s * 1e-9, s * 1e6, p.fill_s * 1e6, macs / (s - p.fill_s) * 1e-9, worst);
    free(w), free(x), free(p.y);
    return worst < 1e-5 ? 0 : 1;
}
#else
int main(void)
{
    fprintf(stderr, "bench_amx_q4k_sb: AMX is an x86-64 feature\n");
    return 1;
}
#endif
