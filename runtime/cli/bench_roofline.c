/* `woolly bench --roofline` (bench_roofline.h). */
#include "bench_roofline.h"

#include <math.h>
#include <stdio.h>

#include "arch.h"
#include "cli_common.h"
#include "context.h"
#include "gguf.h"
#include "machine_limits.h"
#include "tune.h"

/* What the tuner's table of matrices does not say about a token's reads, from the model's hyperparameters:
 * - A mixture of experts' token reads k of each layer's n experts (the k its router chose): of each
 *   expert tensor's bytes, which the table counts whole, k/n; of its multiply-adds, which the table
 *   counts once (one matrix of the shape per tensor), k times. Sets r->n_expert, r->n_expert_used and
 *   r->expert_bytes (all experts' bytes), and corrects r->bytes_per_token and r->macs_layers.
 * - A sliding-window layer's token reads at most its window of the cache, however deep the context:
 *   sets r->kv_sliding_layers and r->kv_window.
 * A model of an architecture the runtime does not know is left as it is. */
static int count_what_a_token_reads(const char *cmd, bench_run *r)
{
    woolly_error err = {{0}};
    gguf_file *g = gguf_open(r->model_path, &err);
    if (!g) {
        fprintf(stderr, "woolly %s: --roofline: %s\n", cmd, err.msg);
        return -1;
    }
    gguf_str name;
    woolly_config c = {0};
    const woolly_arch *a = NULL;
    if (gguf_get_str(g, "general.architecture", &name, &err) && (a = woolly_arch_find(name)) &&
        woolly_arch_read_config(g, r->model_path, &c, &err)) {
        fprintf(stderr, "woolly %s: --roofline: %s\n", cmd, err.msg);
        gguf_close(g);
        return -1;
    }
    if (a && c.n_expert > 0)
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const gguf_tensor *t = &g->tensors[i];
            int layer;
            const woolly_arch_tensor *d = woolly_arch_match(a, t->name, &layer);
            if (!d || d->kind != WOOLLY_TENSOR_EXPERTS || t->n_dims != 3)
                continue;
            const double rows = (double)t->ne[1], cols = (double)t->ne[0];
            const double bytes = (double)woolly_row_bytes(t->type, (int64_t)t->ne[0]) * rows * (double)t->ne[2];
            const double k = c.n_expert_used, n = (double)t->ne[2];
            r->expert_bytes += bytes;
            r->bytes_per_token -= bytes * (1.0 - k / n);
            r->macs_layers += rows * cols * (k - 1.0);
        }
    r->n_expert = a ? c.n_expert : 0;
    r->n_expert_used = a ? c.n_expert_used : 0;
    r->kv_sliding_layers = 0, r->kv_window = 0;
    for (int32_t l = 0; a && l < c.n_layer; l++)
        if (woolly_layer_window(&c, l) > 0)
            r->kv_sliding_layers++, r->kv_window = woolly_layer_window(&c, l);
    gguf_close(g);
    return 0;
}

int bench_work_per_token(const char *cmd, bench_run *r)
{
    woolly_tune_model tm;
    woolly_error err = {{0}};
    if (woolly_tune_model_from_gguf(r->model_path, &tm, &err)) {
        fprintf(stderr, "woolly %s: --roofline: %s\n", cmd, err.msg);
        return -1;
    }
    r->bytes_per_token = tm.matrix_bytes;
    r->kv_bytes_per_position = (double)woolly_kv_cache_bytes(woolly_kv_wtype(cli_kv_type(r->kv_type)), 1,
                                                             tm.n_layer, tm.n_head_kv, tm.head_dim);
    r->kv_layers = tm.n_layer;
    r->macs_layers = r->macs_output = 0.0;
    double macs_bf16 = 0.0, macs_f32 = 0.0;
    for (int i = 0; i < tm.n_shapes; i++) {
        const woolly_tune_shape *s = &tm.shapes[i];
        const double macs = (double)s->rows * (double)s->cols * s->n_tensors;
        if (s->classes[WOOLLY_TOKENS_LARGE] && s->type == WOOLLY_TYPE_BF16)
            macs_bf16 += macs;
        if (s->classes[WOOLLY_TOKENS_LARGE] && (s->type == WOOLLY_TYPE_F16 || s->type == WOOLLY_TYPE_F32))
            macs_f32 += macs;
        /* A shape that never runs a large batch is the output matrix's (a prompt's logits are its last
         * token's; one that shares a layer matrix's shape is counted with the layers: an overcount of at
         * most one matrix per prompt). */
        if (s->classes[WOOLLY_TOKENS_LARGE])
            r->macs_layers += macs;
        else
            r->macs_output += macs;
    }
    woolly_tune_model_free(&tm);
    r->prompt_rate = macs_bf16 > 0.5 * r->macs_layers  ? BENCH_RATE_BF16
                     : macs_f32 > 0.5 * r->macs_layers ? BENCH_RATE_F32
                                                       : BENCH_RATE_INT8;
    return count_what_a_token_reads(cmd, r);
}

int bench_sample_roof(const char *cmd, int threads, bench_roof *best)
{
    woolly_limits l;
    if (woolly_measure_limits(threads, &l)) {
        fprintf(stderr,
                "woolly %s: --roofline: cannot measure the machine's limits with %d threads (no memory "
                "for the read buffer of 4x the L3 and at least 256 MiB, or no thread pool)\n",
                cmd, threads);
        return -1;
    }
    if (best->samples++ == 0) {
        best->int8_instr = l.int8_instr;
        best->bf16_instr = l.bf16_instr;
        best->f32_instr = l.f32_instr;
        best->dram_read_low_gbs = l.dram_read_gbs;
        best->int8_low_gmacs = l.int8_gmacs;
    }
    best->dram_read_gbs = fmax(best->dram_read_gbs, l.dram_read_gbs);
    best->int8_gmacs = fmax(best->int8_gmacs, l.int8_gmacs);
    best->bf16_gmacs = fmax(best->bf16_gmacs, l.bf16_gmacs);
    best->f32_gmacs = fmax(best->f32_gmacs, l.f32_gmacs);
    best->dram_read_low_gbs = fmin(best->dram_read_low_gbs, l.dram_read_gbs);
    best->int8_low_gmacs = fmin(best->int8_low_gmacs, l.int8_gmacs);
    return 0;
}

/* The KV cache bytes an average token of n generated at a depth reads: the token at depth + i reads
 * depth + i + 1 positions of a global layer's cache (depth + (n + 1) / 2 on average), and of a sliding
 * layer's at most its window. */
static double kv_bytes_per_token(const bench_run *r, int64_t depth, int64_t n)
{
    if (r->kv_layers <= 0 || n <= 0)
        return 0.0;
    const double per_layer = r->kv_bytes_per_position / r->kv_layers;
    double sliding = 0.0;
    for (int64_t i = 0; r->kv_sliding_layers > 0 && i < n; i++)
        sliding += (double)(depth + i + 1 < r->kv_window ? depth + i + 1 : r->kv_window);
    const double global = (double)depth + (double)(n + 1) / 2.0;
    return per_layer * ((r->kv_layers - r->kv_sliding_layers) * global + r->kv_sliding_layers * sliding / n);
}

void bench_settle_prompt_rate(bench_run *r, const bench_roof *roof)
{
    if (r->prompt_rate == BENCH_RATE_BF16 && roof->bf16_gmacs <= 0.0)
        r->prompt_rate = BENCH_RATE_F32;
}

void bench_apply_roof(const bench_run *r, const bench_roof *roof, bench_test *t)
{
    t->has_roof = true;
    t->roof = *roof;
    if (t->batched) {
        t->work_per_token = r->macs_layers + r->macs_output / t->n;
        t->work_rate = t->work_per_token * t->mean_ts / 1e9;
        /* BF16 weights' prompts multiply BF16 (or F32) values: their ceiling is the BF16 rate, where the
         * level has one (bench_settle_prompt_rate: else the FMA rate). F16 and F32 weights' GEMMs
         * multiply-add in F32: the FMA rate. */
        t->limit = r->prompt_rate == BENCH_RATE_BF16  ? roof->bf16_gmacs
                   : r->prompt_rate == BENCH_RATE_F32 ? roof->f32_gmacs
                                                      : roof->int8_gmacs;
    } else {
        t->work_per_token = r->bytes_per_token + kv_bytes_per_token(r, t->depth, t->n);
        t->work_rate = t->work_per_token * t->mean_ts / 1e9;
        t->limit = roof->dram_read_gbs;
    }
}
