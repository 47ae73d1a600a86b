/* woolly tune: measures the kernel variants and blocking on the shapes a model needs, on this machine,
 * within a time budget, prints what it chose beside the defaults, and writes the tuning profile every
 * later run loads (tune/tune.h, runtime/model/profile.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_common.h"
#include "commands.h"
#include "context.h"
#include "cpu.h"
#include "synth.h"
#include "timing.h"
#include "tune.h"

typedef struct progress_bar {
    bool tty;
    double t0, budget;
} progress_bar;

static void show_progress(void *ctx, double done, const char *what)
{
    const progress_bar *p = ctx;
    if (!p->tty)
        return;
    enum { WIDTH = 30 };
    const int filled = (int)(done * WIDTH + 0.5);
    fprintf(stderr, "\r[%.*s%*s] %3.0f%%  %4.0f s of %.0f s  %.70s\033[K", filled,
            "##############################", WIDTH - filled, "", 100 * done, woolly_now_s() - p->t0,
            p->budget, what);
    if (done >= 1)
        fputc('\n', stderr);
    fflush(stderr);
}

static const char *type_name(enum woolly_type t)
{
    const woolly_type_info *ti = woolly_type_get(t);
    return ti ? ti->name : "?";
}

static void step_text(const woolly_matmul_step *s, char *buf, size_t n)
{
    int len = snprintf(buf, n, "%s", s->kernel->name);
    const struct {
        const char *name;
        int32_t v;
    } p[] = {{"split", s->threads},
             {"rows", s->rows_per_call},
             {"k", s->k_per_call},
             {"tokens", s->tokens_per_call},
             {"prefetch", s->prefetch}};
    for (size_t i = 0; i < sizeof p / sizeof p[0] && len > 0 && (size_t)len < n; i++)
        if (p[i].v)
            len += snprintf(buf + len, n - (size_t)len, " %s=%d", p[i].name, p[i].v);
}

static void attn_step_text(const woolly_profile_attn *a, char *buf, size_t n)
{
    if (a->phase == WOOLLY_ATTN_DECODE)
        snprintf(buf, n, "%s split=%d", a->kernel->name, a->kv_split);
    else
        snprintf(buf, n, "%s queries=%d", a->kernel->name, a->queries_per_call);
}

/* Attention's cases: per phase, the default kernel (tile) and blocking beside the choice, per layer. */
static void print_attention(const woolly_tune_result *r)
{
    if (!r->n_attn) {
        printf("\nattention not tuned: %s\n", r->attn_skipped[0] ? r->attn_skipped : "?");
        return;
    }
    printf("\n| attention | cache | head dim | measured at (one layer) | threads | default | time | chosen | "
           "time | speedup |\n"
           "|---|---|---:|---|---:|---|---:|---|---:|---:|\n");
    for (int i = 0; i < r->n_attn; i++) {
        const woolly_tune_attn_case *c = &r->attn[i];
        char def[192], chosen[192];
        attn_step_text(&c->def, def, sizeof def);
        attn_step_text(&c->chosen, chosen, sizeof chosen);
        printf("| %s | %s | %d | %d quer%s, %d positions | %d | %s | %.1f us | %s%s | %.1f us | %.2fx |\n",
               woolly_attn_phase_name(c->chosen.phase), type_name(c->chosen.cache), c->chosen.head_dim,
               c->chosen.queries, c->chosen.queries == 1 ? "y" : "ies", c->chosen.positions,
               c->chosen.threads, def, c->def.us, chosen,
               c->reverted    ? " (kept: the choice did not hold up)"
               : c->unchecked ? " (kept: no budget left to check the choice)"
                              : "",
               c->chosen.us, c->chosen.us > 0 ? c->def.us / c->chosen.us : 1.0);
    }
}

static void print_tables(const woolly_tune_model *m, const woolly_tune_result *r, int threads)
{
    printf("| weights | shape | tensors | default layout | chosen layout | batch-mix time, default | chosen "
           "| speedup |\n"
           "|---|---|---:|---|---|---:|---:|---:|\n");
    double def_total = 0, chosen_total = 0;
    for (int i = 0; i < r->n_layouts; i++) {
        const woolly_tune_layout_choice *l = &r->layouts[i];
        const woolly_tune_shape *s = &m->shapes[l->shape];
        printf("| %s | %lldx%lld | %d (%s) | %s | %s | %.0f us | %.0f us | %.2fx |\n", type_name(s->type),
               (long long)s->rows, (long long)s->cols, s->n_tensors, s->example,
               l->def ? l->def->name : "rows", l->chosen ? l->chosen->name : "rows", l->def_cost_us,
               l->chosen_cost_us, l->chosen_cost_us > 0 ? l->def_cost_us / l->chosen_cost_us : 1.0);
        def_total += l->def_cost_us * s->n_tensors;
        chosen_total += l->chosen_cost_us * s->n_tensors;
    }
    printf("\n| op | weights | shape | tokens (measured at) | threads | default | time | chosen | time | "
           "speedup |\n"
           "|---|---|---|---|---:|---|---:|---|---:|---:|\n");
    int slower = 0;
    for (int i = 0; i < r->n_cases; i++) {
        const woolly_tune_case *c = &r->cases[i];
        const woolly_tune_shape *s = &m->shapes[c->shape];
        char def[192], chosen[192];
        step_text(&c->def, def, sizeof def);
        step_text(&c->chosen, chosen, sizeof chosen);
        const double speedup = c->chosen_us > 0 ? c->def_us / c->chosen_us : 1.0;
        slower += c->def_allowed && speedup < 1.0;
        printf("| %s | %s | %lldx%lld | %s (%d) | %d | %s%s | %.1f us | %s%s | %.1f us | %.2fx |\n",
               c->cls == WOOLLY_TOKENS_1 ? "gemv" : "gemm", type_name(s->type), (long long)s->rows,
               (long long)s->cols, woolly_tokens_class_name(c->cls), WOOLLY_TUNE_TOKENS[c->cls], threads, def,
               c->def_allowed ? "" : " (not strict)", c->def_us, chosen,
               c->reverted ? " (kept: the choice did not hold up)" : "", c->chosen_us, speedup);
    }
    printf("\nbatch mix over all %s matrices: %.1f ms by default, %.1f ms tuned (%.2fx); %d measurements in "
           "%.0f s\n",
           m->name, def_total / 1e3, chosen_total / 1e3, chosen_total > 0 ? def_total / chosen_total : 1.0,
           r->measurements, r->elapsed_s);
    print_attention(r);
    if (slower)
        printf("%d case%s slower than the default: the price of a layout whose batch-mix total is faster, or "
               "of strict "
               "accuracy\n",
               slower, slower == 1 ? " is" : "s are");
    else
        printf("every case matches or beats its default\n");
    if (r->shapes_skipped)
        printf("the budget ran out: %d shape%s keep the defaults (raise --budget)\n", r->shapes_skipped,
               r->shapes_skipped == 1 ? "" : "s");
}

/* "D,S,L": tokens per class of the batch mix. */
static int parse_mix(const char *s, int32_t *mix)
{
    char *end;
    for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++) {
        const long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 1 << 30 || *end != (c < WOOLLY_TOKENS_CLASSES - 1 ? ',' : 0))
            return -1;
        mix[c] = (int32_t)v;
        s = end + 1;
    }
    return mix[0] + mix[1] + mix[2] > 0 ? 0 : -1;
}

int woolly_cmd_tune(int argc, char **argv)
{
    const char *cmd = argv[0];
    const char *model_path = NULL, *preset = NULL, *out = NULL, *accuracy = "default",
               *mix_text = "128,0,512", *kv_type = "f16";
    float budget = 0;
    int32_t threads = woolly_cpu_get()->n_cores > 0 ? woolly_cpu_get()->n_cores : 1;
    if (threads > WOOLLY_MAX_THREADS)
        threads = WOOLLY_MAX_THREADS;
    cli_table t = {
        .synopsis = "(-m MODEL | --preset NAME) [-t THREADS] [--budget SECONDS] [-o FILE]",
        .about = "Measures the kernel variants and their blocking on the matrix shapes the model needs, on\n"
                 "this machine, and writes the profile every later run on this CPU loads. Runs never\n"
                 "measure anything themselves.\n"};
    cli_add(&t, (cli_flag){"-m", "--model", CLI_STR, &model_path, 0, 0, "MODEL",
                           "tune for this GGUF model's shapes", NULL});
    char preset_help[256]; /* the names from synth's preset table, whose shapes are tuned */
    snprintf(preset_help, sizeof preset_help, "or for a synth preset's (%s; no file needed)",
             woolly_synth_preset_names());
    cli_add(&t, (cli_flag){NULL, "--preset", CLI_STR, &preset, 0, 0, "NAME", preset_help, NULL});
    cli_add(&t, (cli_flag){"-t", "--threads", CLI_INT, &threads, 1, WOOLLY_MAX_THREADS, "N",
                           "the thread count to tune for (default: the number of cores)", NULL});
    cli_add(&t, (cli_flag){NULL, "--budget", CLI_FLOAT, &budget, 0.5, 86400, "SECONDS",
                           "wall time for the whole run (default: 20 s to 3 min by model size)", NULL});
    cli_add(&t,
            (cli_flag){"-o", "--output", CLI_STR, &out, 0, 0, "FILE",
                       "where to write the profile (default: this CPU's place in $XDG_CACHE_HOME/woolly/)",
                       NULL});
    cli_add(&t, (cli_flag){
                    NULL, "--accuracy", CLI_ENUM, &accuracy, 0, 0, "default|strict",
                    "strict: only F16/F32 activation kernels (default: int8 too, within the tests' bounds)",
                    NULL});
    cli_add(&t,
            (cli_flag){NULL, "--mix", CLI_STR, &mix_text, 0, 0, "D,S,L",
                       "tokens of 1, 2-16 and 17+ per batch the layouts are weighed for (default 128,0,512)",
                       NULL});
    cli_add(&t, (cli_flag){NULL, "--kv-type", CLI_ENUM, &kv_type, 0, 0, "f16|f32|q8_0",
                           "the KV cache type attention is tuned for (default f16, as runs)", NULL});
    const int st = cli_parse(&t, argc, argv);
    if (st != CLI_PROCEED)
        return st;
    if ((model_path != NULL) == (preset != NULL)) {
        fprintf(stderr, "woolly %s: give either -m MODEL or --preset NAME (see woolly %s --help)\n", cmd,
                cmd);
        return 2;
    }
    woolly_tune_opts o = {.threads = threads,
                          .strict = !strcmp(accuracy, "strict"),
                          .kv_cache = woolly_kv_wtype(cli_kv_type(kv_type))};
    if (parse_mix(mix_text, o.mix)) {
        fprintf(stderr, "woolly %s: --mix '%s' is not three token counts D,S,L (not all 0)\n", cmd, mix_text);
        return 2;
    }
    woolly_error err = {{0}};
    if (woolly_isa_init(&err)) {
        fprintf(stderr, "woolly %s: %s\n", cmd, err.msg);
        return 1;
    }
    char default_path[1024];
    if (!out) {
        if (woolly_profile_default_path(default_path, sizeof default_path)) {
            fprintf(stderr, "woolly %s: neither XDG_CACHE_HOME nor HOME is set: give -o FILE\n", cmd);
            return 2;
        }
        out = default_path;
    }

    woolly_tune_model m;
    if (model_path ? woolly_tune_model_from_gguf(model_path, &m, &err)
                   : woolly_tune_model_from_preset(preset, &m, &err)) {
        fprintf(stderr, "woolly %s: %s\n", cmd, err.msg);
        return 1;
    }
    o.budget_s = budget > 0 ? budget : woolly_tune_default_budget(&m);
    progress_bar bar = {.tty = isatty(STDERR_FILENO) != 0, .t0 = woolly_now_s(), .budget = o.budget_s};
    o.progress = show_progress;
    o.progress_ctx = &bar;
    fprintf(stderr, "woolly %s: %s, %d matrix shapes, %d thread%s, level %s, %s accuracy, budget %.0f s\n",
            cmd, m.name, m.n_shapes, threads, threads == 1 ? "" : "s", woolly_isa_name(woolly_isa_active()),
            accuracy, o.budget_s);

    woolly_tune_result r;
    int status = 1;
    if (woolly_tune_run(&m, &o, &r, &err)) {
        if (bar.tty)
            fputc('\n', stderr);
        fprintf(stderr, "woolly %s: %s\n", cmd, err.msg);
        woolly_tune_model_free(&m);
        return 1;
    }
    print_tables(&m, &r, threads);
    if (woolly_profile_save(r.profile, out, &err)) {
        fprintf(stderr, "woolly %s: %s\n", cmd, err.msg);
    } else {
        printf("profile: %s\n", out);
        status = 0;
    }
    woolly_tune_result_free(&r);
    woolly_tune_model_free(&m);
    return status;
}
