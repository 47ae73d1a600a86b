/* The search: per shape, the defaults, every layout's best kernel per class, the layout for the batch
 * mix, the chosen step's blocking, and a last check against the defaults (see tune.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "timing.h"
#include "tune.h"
#include "tune_attn.h"
#include "tune_measure.h"

/* The batch each class is timed at. The large class at 128 tokens: at 32 the small-batch tiles won steps
 * that they lose inside a pp512 run (llama-1b tuned at 32 ran pp512 4-7% slower than the defaults). */
const int WOOLLY_TUNE_TOKENS[WOOLLY_TOKENS_CLASSES] = {1, 8, 128};

/* A challenger replaces the incumbent only when this much faster: ties and noise keep the default. */
#define NOISE_MARGIN 0.03
/* A candidate whose first call is this many times slower than the best so far is not timed further. */
#define PRUNE_FACTOR 3.0
/* Rounds of the final comparison of a choice with its default (the lower median of each is kept:
 * other processes only ever add time). */
#define VERIFY_ROUNDS 2
/* Per measurement: no less than this (so that even a short budget times something), no more than
 * this (a long budget ends early rather than over-measure). */
#define MIN_MEASURE_S 0.004
#define MAX_MEASURE_S 0.6
/* Rough measurements of one class's blocking search (for the budget's plan before it starts). */
#define REFINE_ESTIMATE 11
/* Cache sizes assumed where the CPU does not say. */
#define DEFAULT_L1D (32 << 10)
#define DEFAULT_L2 (1 << 20)
#define DEFAULT_L3 (32 << 20)
#define MAX_ROTATE_BYTES (256.0 * (1 << 20))
/* Attention's least share of the budget. */
#define ATTN_MIN_SHARE 0.12

enum { MAX_LAYOUTS = 8, MAX_VALUES = 8, N_PARAMS = 5 };

typedef struct tuner {
    const woolly_tune_model *model;
    const woolly_tune_opts *o;
    woolly_threadpool *pool;
    double t0, deadline;
    double shape_deadline; /* the current shape's share of the budget ends here (for its blocking search) */
    int planned;           /* measurements, estimated; grows if the estimate was short */
    unsigned act_mask;
    long l1d, l2, l3;
    woolly_tune_result *r;
} tuner;

static const char *type_name(enum woolly_type t)
{
    const woolly_type_info *ti = woolly_type_get(t);
    return ti ? ti->name : "?";
}

static bool used(const woolly_tune_shape *s, int c)
{
    return s->classes[c];
}

static bool same_step(const woolly_matmul_step *a, const woolly_matmul_step *b)
{
    return a->kernel == b->kernel && a->rows_per_call == b->rows_per_call &&
           a->tokens_per_call == b->tokens_per_call && a->k_per_call == b->k_per_call &&
           a->prefetch == b->prefetch && a->threads == b->threads;
}

/* Whether kernel k can serve class c of shape s in layout l under the accuracy rule. */
static bool candidate(const tuner *t, const woolly_kernel *k, const woolly_tune_shape *s,
                      const woolly_layout *l, int c)
{
    const woolly_matmul_step st = {.kernel = k};
    return k->layout == l && (t->act_mask >> k->act & 1) &&
           !woolly_matmul_step_check(&st, s->type, l, s->cols, (enum woolly_tokens_class)c, NULL);
}

/* The layouts any candidate of the shape reads (GGUF rows first). */
static int layouts_of(const tuner *t, const woolly_tune_shape *s, const woolly_layout **out)
{
    int n = 0, nk;
    const woolly_kernel *ks = woolly_kernel_list(&nk);
    for (int pass = 0; pass < 2; pass++) /* rows, then the others in registry order */
        for (int i = 0; i < nk; i++) {
            const woolly_layout *l = ks[i].layout;
            if ((pass == 0) != (l == NULL) || ks[i].wtype != s->type)
                continue;
            bool any = false;
            for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++)
                any |= used(s, c) && candidate(t, &ks[i], s, l, c);
            bool seen = false;
            for (int j = 0; j < n; j++)
                seen |= out[j] == l;
            if (any && !seen && n < MAX_LAYOUTS)
                out[n++] = l;
        }
    return n;
}

/* ---- the budget --------------------------------------------------------------------------------- */

static tune_timing timing_for(tuner *t, bool prune, double best_s)
{
    if (t->r->measurements >= t->planned)
        t->planned = t->r->measurements + 1;
    const double left = t->deadline - woolly_now_s();
    double per = left / (double)(t->planned - t->r->measurements);
    per = per < MIN_MEASURE_S ? MIN_MEASURE_S : per > MAX_MEASURE_S ? MAX_MEASURE_S : per;
    /* warm-up, growing the calls per sample, then the samples: about six sample times in all */
    return (tune_timing){.min_sample_s = per / 6,
                         .samples = per >= 0.06 ? 5 : 3,
                         .cap_s = per,
                         .prune_s = prune && best_s > 0 ? PRUNE_FACTOR * best_s : 0};
}

static void describe_step(const woolly_matmul_step *s, char *buf, size_t n)
{
    int len = snprintf(buf, n, "%s", s->kernel ? s->kernel->name : "?");
    const struct {
        const char *name;
        int32_t v;
    } p[N_PARAMS] = {{"split", s->threads},
                     {"rows", s->rows_per_call},
                     {"k", s->k_per_call},
                     {"tokens", s->tokens_per_call},
                     {"prefetch", s->prefetch}};
    for (int i = 0; i < N_PARAMS && len > 0 && (size_t)len < n; i++)
        if (p[i].v)
            len += snprintf(buf + len, n - (size_t)len, " %s=%d", p[i].name, p[i].v);
}

/* Seconds per call of step s for class c of the shape. */
static int measure(tuner *t, tune_weights *w, int si, const woolly_matmul_step *s, int c, double best_s,
                   double *sec, bool *pruned, woolly_error *err)
{
    const tune_timing tm = timing_for(t, true, best_s);
    if (tune_measure(w, t->pool, s, (enum woolly_tokens_class)c, WOOLLY_TUNE_TOKENS[c], &tm, sec, pruned,
                     err))
        return -1;
    t->r->measurements++;
    if (t->o->progress) {
        const woolly_tune_shape *sh = &t->model->shapes[si];
        char step[160], what[256];
        describe_step(s, step, sizeof step);
        snprintf(what, sizeof what, "%s %lldx%lld, %s tok: %s", type_name(sh->type), (long long)sh->rows,
                 (long long)sh->cols, woolly_tokens_class_name((enum woolly_tokens_class)c), step);
        const double done = (double)t->r->measurements / (double)t->planned;
        t->o->progress(t->o->progress_ctx, done < 0.99 ? done : 0.99, what);
    }
    return 0;
}

/* ---- parameter candidates: block sizes from the cache sizes, each under its constraints ----------- */

static int32_t round_down(int64_t v, int64_t unit)
{
    return (int32_t)(v / unit * unit);
}

static void add_value(int32_t *vals, int *n, int32_t v, int32_t current)
{
    if (v == current || *n == MAX_VALUES)
        return;
    for (int i = 0; i < *n; i++)
        if (vals[i] == v)
            return;
    vals[(*n)++] = v;
}

/* The values tried for parameter p of step s (class c): 0 = split (threads), 1 = rows_per_call,
 * 2 = k_per_call, 3 = tokens_per_call, 4 = prefetch. */
static int param_values(const tuner *t, const woolly_tune_shape *sh, const woolly_matmul_step *s, int c,
                        int p, int32_t *vals)
{
    const woolly_kernel *k = s->kernel;
    const int T = t->o->threads;
    int n = 0;
    switch (p) {
    case 0: /* how many of the threads share the rows */
        for (int v = 1; v < T; v *= 2)
            add_value(vals, &n, v, s->threads);
        if (T > 1)
            add_value(vals, &n, T, s->threads);
        break;
    case 1: { /* a weight block per call that fits half of L1, half of L2, or twice L2 */
        const int64_t tile = k->tile_n;
        const double rb = (double)woolly_layout_row_bytes(k->layout, sh->type, sh->cols);
        const int nth = s->threads > 0 ? s->threads : T;
        const int64_t share = (sh->rows + nth - 1) / nth;
        const double targets[] = {t->l1d / 2.0, t->l2 / 2.0, 2.0 * t->l2};
        for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
            const int32_t r = round_down((int64_t)(targets[i] / rb), tile);
            if (r >= tile && r < share)
                add_value(vals, &n, r, s->rows_per_call);
        }
        break;
    }
    case 2: /* half or a quarter of the row per call */
        for (int d = 2; d <= 4; d *= 2) {
            const int32_t v = round_down(sh->cols / d, WOOLLY_QK_K);
            if (v >= WOOLLY_QK_K && v < sh->cols)
                add_value(vals, &n, v, s->k_per_call);
        }
        break;
    case 3: /* GEMM: 1, 4 or 16 register tiles of tokens per call */
        if (c != WOOLLY_TOKENS_1)
            for (int f = 1; f <= 16; f *= 4) {
                const int32_t v = f * k->tile_m;
                if (v < WOOLLY_TUNE_TOKENS[c])
                    add_value(vals, &n, v, s->tokens_per_call);
            }
        break;
    case 4: { /* prefetch distances: up to 8 KiB, the small-batch tiles' default (a stream of several
               * tokens' weights gains from reaching further ahead than one token's) */
        static const int32_t D[] = {256, 1024, 4096, 8192};
        for (size_t i = 0; i < sizeof D / sizeof D[0]; i++)
            add_value(vals, &n, D[i], s->prefetch);
        break;
    }
    }
    return n;
}

static int32_t *param_field(woolly_matmul_step *s, int p)
{
    int32_t *f[N_PARAMS] = {&s->threads, &s->rows_per_call, &s->k_per_call, &s->tokens_per_call,
                            &s->prefetch};
    return f[p];
}

/* ---- one shape ---------------------------------------------------------------------------------- */

typedef struct shape_state {
    woolly_matmul_step def[WOOLLY_TOKENS_CLASSES];
    double def_s[WOOLLY_TOKENS_CLASSES];
    bool def_allowed[WOOLLY_TOKENS_CLASSES];
    const woolly_layout *def_layout;
    const woolly_layout *layouts[MAX_LAYOUTS];
    int n_layouts;
    woolly_matmul_step best[MAX_LAYOUTS][WOOLLY_TOKENS_CLASSES];
    double best_s[MAX_LAYOUTS][WOOLLY_TOKENS_CLASSES];
    bool feasible[MAX_LAYOUTS];
} shape_state;

/* Tokens of the mix that class c carries for this shape (all used classes weigh 1 if the mix gives
 * them nothing). */
static double mix_weight(const tuner *t, const woolly_tune_shape *sh, int c)
{
    double sum = 0;
    for (int k = 0; k < WOOLLY_TOKENS_CLASSES; k++)
        sum += used(sh, k) ? t->o->mix[k] : 0;
    if (!used(sh, c))
        return 0;
    return sum > 0 ? t->o->mix[c] : 1;
}

/* Microseconds the batch mix spends on one matrix of this shape with a step per class. */
static double mix_cost_us(const tuner *t, const woolly_tune_shape *sh, const double *sec)
{
    double us = 0;
    for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++)
        us += mix_weight(t, sh, c) * sec[c] / WOOLLY_TUNE_TOKENS[c] * 1e6;
    return us;
}

static int estimate_shape(const tuner *t, const woolly_tune_shape *sh)
{
    const woolly_layout *ls[MAX_LAYOUTS];
    const int nl = layouts_of(t, sh, ls);
    int nk, n = 0, classes = 0;
    const woolly_kernel *ks = woolly_kernel_list(&nk);
    for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++) {
        if (!used(sh, c))
            continue;
        classes++;
        for (int l = 0; l < nl; l++)
            for (int i = 0; i < nk; i++)
                n += candidate(t, &ks[i], sh, ls[l], c);
    }
    return n + classes * (1 + REFINE_ESTIMATE + 2 * VERIFY_ROUNDS);
}

/* Stage 1 for one layout: the best kernel of each used class at default blocking. A candidate whose
 * first call is PRUNE_FACTOR times slower than the best so far (on this layout, else the default's time,
 * when the default is allowed) is not timed further, and one that lost by that much on small batches is
 * not tried on large ones (its calls would only be longer). */
static int best_kernels(tuner *t, tune_weights *w, int si, shape_state *st, int li, woolly_error *err)
{
    const woolly_tune_shape *sh = &t->model->shapes[si];
    const woolly_layout *l = st->layouts[li];
    int nk;
    const woolly_kernel *ks = woolly_kernel_list(&nk);
    double *small_s = calloc((size_t)nk, sizeof *small_s); /* each kernel's time on small batches, 0 = none */
    if (!small_s)
        return woolly_fail(err, "out of memory");
    st->feasible[li] = true;
    for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++) {
        if (!used(sh, c))
            continue;
        woolly_matmul_step *best = &st->best[li][c];
        double *best_s = &st->best_s[li][c];
        *best = (woolly_matmul_step){0};
        *best_s = 0;
        if (st->def_allowed[c] && st->def[c].kernel->layout == l) { /* the default, measured already */
            *best = st->def[c];
            *best_s = st->def_s[c];
        }
        for (int i = 0; i < nk; i++) {
            const woolly_kernel *k = &ks[i];
            if (k == st->def[c].kernel || !candidate(t, k, sh, l, c))
                continue;
            if (c == WOOLLY_TOKENS_LARGE && small_s[i] < 0)
                continue; /* hopeless on small batches */
            const woolly_matmul_step s = {.kernel = k};
            const double ref = *best_s > 0 ? *best_s : st->def_allowed[c] ? st->def_s[c] : 0;
            double sec;
            bool pruned;
            if (measure(t, w, si, &s, c, ref, &sec, &pruned, err)) {
                free(small_s);
                return -1;
            }
            if (c == WOOLLY_TOKENS_SMALL)
                small_s[i] = pruned ? -1 : sec;
            if (!pruned && (!best->kernel || sec < *best_s * (1 - NOISE_MARGIN))) {
                *best = s;
                *best_s = sec;
            }
        }
        if (c == WOOLLY_TOKENS_SMALL && best->kernel)
            for (int i = 0; i < nk; i++)
                if (small_s[i] > PRUNE_FACTOR * *best_s)
                    small_s[i] = -1;
        if (!best->kernel)
            st->feasible[li] = false;
    }
    free(small_s);
    return 0;
}

/* Stage 2: one parameter at a time, each value against the incumbent. */
static int refine(tuner *t, tune_weights *w, int si, int c, woolly_matmul_step *s, double *s_sec,
                  woolly_error *err)
{
    const woolly_tune_shape *sh = &t->model->shapes[si];
    for (int p = 0; p < N_PARAMS; p++) {
        int32_t vals[MAX_VALUES];
        const int n = param_values(t, sh, s, c, p, vals);
        for (int i = 0; i < n; i++) {
            if (woolly_now_s() > t->shape_deadline)
                return 0; /* the shape's share of the budget is spent: keep what is known */
            woolly_matmul_step trial = *s;
            *param_field(&trial, p) = vals[i];
            if (woolly_matmul_step_check(&trial, sh->type, trial.kernel->layout, sh->cols,
                                         (enum woolly_tokens_class)c, NULL))
                continue;
            double sec;
            bool pruned;
            if (measure(t, w, si, &trial, c, *s_sec, &sec, &pruned, err))
                return -1;
            if (!pruned && sec < *s_sec * (1 - NOISE_MARGIN)) {
                *s = trial;
                *s_sec = sec;
            }
        }
    }
    return 0;
}

/* Stage 3: the choice and its default once more, side by side; the lower median of each. */
static int verify(tuner *t, tune_weights *w, int si, int c, const woolly_matmul_step *chosen,
                  const woolly_matmul_step *def, double *chosen_s, double *def_s, woolly_error *err)
{
    double best[2] = {INFINITY, INFINITY};
    for (int round = 0; round < VERIFY_ROUNDS; round++)
        for (int j = 0; j < 2; j++) {
            double sec;
            bool pruned;
            if (measure(t, w, si, j ? chosen : def, c, 0, &sec, &pruned, err))
                return -1;
            best[j] = sec < best[j] ? sec : best[j];
        }
    *def_s = best[0];
    *chosen_s = best[1];
    return 0;
}

static int add_case(woolly_tune_result *r, const woolly_tune_case *c, woolly_error *err)
{
    woolly_tune_case *more = realloc(r->cases, sizeof *more * (size_t)(r->n_cases + 1));
    if (!more)
        return woolly_fail(err, "out of memory");
    r->cases = more;
    r->cases[r->n_cases++] = *c;
    return 0;
}

/* What the weights rotate over: what a decode step streams between two uses of one matrix (all the
 * model's matrices), up to four times what the caches hold, beyond which every read comes from DRAM
 * anyway; and no more than MAX_ROTATE_BYTES (virtual machines report L3 sizes no chip has). */
static double rotate_bytes(const tuner *t)
{
    const double caches = (double)t->l3 + (double)woolly_cpu_get()->n_cores * (double)t->l2;
    double dram = 4 * caches > 64e6 ? 4 * caches : 64e6;
    dram = dram < MAX_ROTATE_BYTES ? dram : MAX_ROTATE_BYTES;
    return t->model->matrix_bytes < dram ? t->model->matrix_bytes : dram;
}

static int tune_shape(tuner *t, int si, woolly_error *err)
{
    const woolly_tune_shape *sh = &t->model->shapes[si];
    shape_state *st = calloc(1, sizeof *st);
    if (!st)
        return woolly_fail(err, "out of memory");
    int rc = -1;
    tune_weights *w =
        tune_weights_open(sh->type, sh->rows, sh->cols, rotate_bytes(t), WOOLLY_TUNE_TOKENS[2], err);
    if (!w)
        goto done;

    /* The defaults: what a run without a profile does. */
    enum woolly_act act0;
    if (woolly_matmul_default_format(sh->type, sh->cols, WOOLLY_ACT_MASK_ALL, &act0, &st->def_layout, err))
        goto done;
    for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++) {
        if (!used(sh, c))
            continue;
        st->def[c].kernel = woolly_matmul_default_kernel((enum woolly_tokens_class)c, sh->type, act0,
                                                         st->def_layout);
        if (!st->def[c].kernel) {
            woolly_fail(err, "%s %lldx%lld: no default kernel for %s tokens", type_name(sh->type),
                        (long long)sh->rows, (long long)sh->cols,
                        woolly_tokens_class_name((enum woolly_tokens_class)c));
            goto done;
        }
        st->def_allowed[c] = t->act_mask >> act0 & 1;
        bool pruned;
        if (measure(t, w, si, &st->def[c], c, 0, &st->def_s[c], &pruned, err))
            goto done;
    }

    /* Stage 1: each layout's best kernels; the layout for the mix (the default's unless another is
     * faster by more than the noise). */
    st->n_layouts = layouts_of(t, sh, st->layouts);
    int chosen = -1, def_li = -1;
    double cost[MAX_LAYOUTS];
    for (int li = 0; li < st->n_layouts; li++) {
        if (best_kernels(t, w, si, st, li, err))
            goto done;
        if (!st->feasible[li])
            continue;
        cost[li] = mix_cost_us(t, sh, st->best_s[li]);
        if (st->layouts[li] == st->def_layout)
            def_li = li;
        if (chosen < 0 || cost[li] < cost[chosen])
            chosen = li;
    }
    if (def_li >= 0 && cost[chosen] >= cost[def_li] * (1 - NOISE_MARGIN))
        chosen = def_li;
    if (chosen < 0) {
        woolly_fail(err, "%s %lldx%lld: no layout has kernels for every batch size%s", type_name(sh->type),
                    (long long)sh->rows, (long long)sh->cols,
                    t->o->strict ? " with F16/F32 activations" : "");
        goto done;
    }

    /* Stage 2: the blocking of the chosen layout's kernels. */
    woolly_matmul_step pick[WOOLLY_TOKENS_CLASSES];
    double pick_s[WOOLLY_TOKENS_CLASSES] = {0};
    memcpy(pick, st->best[chosen], sizeof pick);
    memcpy(pick_s, st->best_s[chosen], sizeof pick_s);
    int by_time[WOOLLY_TOKENS_CLASSES] = {0, 1, 2}; /* where the batch mix spends most, first */
    for (int i = 1; i < WOOLLY_TOKENS_CLASSES; i++)
        for (int j = i; j > 0; j--) {
            const int x = by_time[j - 1], y = by_time[j];
            if (mix_weight(t, sh, x) * pick_s[x] / WOOLLY_TUNE_TOKENS[x] >=
                mix_weight(t, sh, y) * pick_s[y] / WOOLLY_TUNE_TOKENS[y])
                break;
            by_time[j - 1] = y, by_time[j] = x;
        }
    for (int i = 0; i < WOOLLY_TOKENS_CLASSES; i++)
        if (used(sh, by_time[i]) && refine(t, w, si, by_time[i], &pick[by_time[i]], &pick_s[by_time[i]], err))
            goto done;

    /* Stage 3: every choice that differs from its default, measured again beside it. */
    woolly_tune_case cases[WOOLLY_TOKENS_CLASSES];
    double def_v[WOOLLY_TOKENS_CLASSES] = {0}, pick_v[WOOLLY_TOKENS_CLASSES] = {0};
    for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++) {
        if (!used(sh, c))
            continue;
        cases[c] = (woolly_tune_case){.shape = si,
                                      .cls = (enum woolly_tokens_class)c,
                                      .def = st->def[c],
                                      .chosen = pick[c],
                                      .def_allowed = st->def_allowed[c]};
        def_v[c] = st->def_s[c];
        pick_v[c] = pick_s[c];
        if (!same_step(&pick[c], &st->def[c]) && st->def_allowed[c]) {
            if (verify(t, w, si, c, &pick[c], &st->def[c], &pick_v[c], &def_v[c], err))
                goto done;
            cases[c].verified = true;
        }
    }
    const woolly_layout *layout = st->layouts[chosen];
    bool all_allowed = true;
    for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++)
        all_allowed &= !used(sh, c) || st->def_allowed[c];
    if (all_allowed) {
        if (layout == st->def_layout) { /* class by class: a choice slower than its default goes */
            for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++)
                if (used(sh, c) && cases[c].verified && pick_v[c] >= def_v[c]) {
                    cases[c].chosen = st->def[c];
                    pick_v[c] = def_v[c];
                    cases[c].reverted = true;
                }
        } else if (mix_cost_us(t, sh, pick_v) >=
                   mix_cost_us(t, sh, def_v)) { /* the layout's trade did not pay */
            layout = st->def_layout;
            for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++)
                if (used(sh, c)) {
                    cases[c].chosen = st->def[c];
                    pick_v[c] = def_v[c];
                    cases[c].reverted = true;
                }
        }
    }

    /* The profile's rows and the report. */
    woolly_tune_layout_choice lc = {.shape = si,
                                    .def = st->def_layout,
                                    .chosen = layout,
                                    .def_cost_us = mix_cost_us(t, sh, def_v),
                                    .chosen_cost_us = mix_cost_us(t, sh, pick_v)};
    woolly_tune_layout_choice *more = realloc(t->r->layouts, sizeof *more * (size_t)(t->r->n_layouts + 1));
    if (!more) {
        woolly_fail(err, "out of memory");
        goto done;
    }
    t->r->layouts = more;
    t->r->layouts[t->r->n_layouts++] = lc;
    const woolly_profile_layout lrow = {sh->type, sh->rows, sh->cols, layout};
    if (woolly_profile_add_layout(t->r->profile, &lrow, err))
        goto done;
    for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++) {
        if (!used(sh, c))
            continue;
        cases[c].def_us = def_v[c] * 1e6;
        cases[c].chosen_us = pick_v[c] * 1e6;
        const woolly_profile_matmul row = {.type = sh->type,
                                           .rows = sh->rows,
                                           .cols = sh->cols,
                                           .cls = (enum woolly_tokens_class)c,
                                           .threads = t->o->threads,
                                           .step = cases[c].chosen,
                                           .us = cases[c].chosen_us,
                                           .default_kernel = st->def[c].kernel,
                                           .default_us = cases[c].def_us};
        if (woolly_profile_add_matmul(t->r->profile, &row, err) || add_case(t->r, &cases[c], err))
            goto done;
    }
    rc = 0;
done:
    tune_weights_close(w);
    free(st);
    return rc;
}

/* ---- the run ------------------------------------------------------------------------------------ */

/* Attention's view of the budget (tune_attn.h). */
static tune_timing attn_timing(void *ctx, bool prune, double best_s)
{
    return timing_for(ctx, prune, best_s);
}

static void attn_measured(void *ctx, const char *what)
{
    tuner *t = ctx;
    t->r->measurements++;
    if (t->o->progress) {
        const double done = (double)t->r->measurements / (double)t->planned;
        t->o->progress(t->o->progress_ctx, done < 0.99 ? done : 0.99, what);
    }
}

double woolly_tune_default_budget(const woolly_tune_model *m)
{
    const double granite_8b = 4.6 * (1 << 30);
    const double s = 20.0 + 160.0 * (m->matrix_bytes / granite_8b);
    return s > 180.0 ? 180.0 : s;
}

/* Shapes by the bytes the model holds in them: the budget goes first where the time goes. */
static const woolly_tune_model *g_sort_model;
static int by_weight(const void *a, const void *b)
{
    const woolly_tune_shape *x = &g_sort_model->shapes[*(const int *)a],
                            *y = &g_sort_model->shapes[*(const int *)b];
    const double wx = (double)x->n_tensors * (double)woolly_row_bytes(x->type, x->cols) * (double)x->rows;
    const double wy = (double)y->n_tensors * (double)woolly_row_bytes(y->type, y->cols) * (double)y->rows;
    return (wx < wy) - (wx > wy);
}

int woolly_tune_run(const woolly_tune_model *m, const woolly_tune_opts *o, woolly_tune_result *r,
                    woolly_error *err)
{
    memset(r, 0, sizeof *r);
    if (o->threads < 1 || o->threads > WOOLLY_MAX_THREADS)
        return woolly_fail(err, "thread count %d is outside [1, %d]", o->threads, WOOLLY_MAX_THREADS);
    if (!(o->budget_s > 0))
        return woolly_fail(err, "the budget must be a positive number of seconds");
    if (woolly_act_forced() >= 0)
        return woolly_fail(
            err, "WOOLLY_ACT is set: a profile chooses activation formats itself, and runs ignore it "
                 "while WOOLLY_ACT is set; unset it (--accuracy strict keeps to F16/F32)");
    const woolly_cpu *cpu = woolly_cpu_get();
    tuner t = {.model = m,
               .o = o,
               .act_mask = o->strict ? WOOLLY_ACT_MASK_STRICT : WOOLLY_ACT_MASK_ALL,
               .r = r,
               .l1d = cpu->l1d_bytes > 0 ? cpu->l1d_bytes : DEFAULT_L1D,
               .l2 = cpu->l2_bytes > 0 ? cpu->l2_bytes : DEFAULT_L2,
               .l3 = cpu->l3_bytes > 0 ? cpu->l3_bytes : DEFAULT_L3};
    t.t0 = woolly_now_s();
    t.deadline = t.t0 + o->budget_s;
    if (!(r->profile = woolly_profile_new(o->strict, o->mix)))
        return woolly_fail(err, "out of memory");
    if (!(t.pool = woolly_threadpool_open(o->threads, err))) {
        woolly_tune_result_free(r);
        return -1;
    }
    int *order = malloc(sizeof *order * (size_t)(m->n_shapes ? m->n_shapes : 1));
    if (!order) {
        woolly_threadpool_close(t.pool);
        woolly_tune_result_free(r);
        return woolly_fail(err, "out of memory");
    }
    for (int i = 0; i < m->n_shapes; i++) {
        order[i] = i;
        t.planned += estimate_shape(&t, &m->shapes[i]);
    }
    /* Attention last, in its share of the budget (by its count of measurements, and at least
     * ATTN_MIN_SHARE: its calls are long, a prefill call over 512 queries tens of milliseconds): the
     * matrices, where most of the time goes, get theirs first. */
    const int attn_planned = tune_attn_estimate(m, o);
    t.planned += attn_planned;
    double attn_share = o->budget_s * attn_planned / t.planned;
    if (attn_planned && attn_share < ATTN_MIN_SHARE * o->budget_s)
        attn_share = ATTN_MIN_SHARE * o->budget_s;
    t.deadline -= attn_share;
    g_sort_model = m;
    qsort(order, (size_t)m->n_shapes, sizeof *order, by_weight);
    int rc = 0, left = t.planned - attn_planned;
    for (int i = 0; i < m->n_shapes && !rc; i++) {
        const double now = woolly_now_s();
        if (now > t.deadline) { /* the rest keep the defaults */
            r->shapes_skipped = m->n_shapes - i;
            break;
        }
        /* This shape's share of what is left, by its share of the measurements left. */
        const int est = estimate_shape(&t, &m->shapes[order[i]]);
        t.shape_deadline = now + (t.deadline - now) * est / (left > est ? left : est);
        left -= est;
        rc = tune_shape(&t, order[i], err);
    }
    free(order);
    t.deadline += attn_share;
    const tune_attn_env env = {t.pool, rotate_bytes(&t), t.deadline, attn_timing, attn_measured, &t};
    if (!rc)
        rc = tune_attn_run(m, o, &env, r, err);
    woolly_threadpool_close(t.pool);
    r->elapsed_s = woolly_now_s() - t.t0;
    if (rc) {
        woolly_tune_result_free(r);
        return -1;
    }
    if (o->progress)
        o->progress(o->progress_ctx, 1.0, "done");
    return 0;
}

void woolly_tune_result_free(woolly_tune_result *r)
{
    woolly_profile_free(r->profile);
    free(r->cases);
    free(r->layouts);
    memset(r, 0, sizeof *r);
}
