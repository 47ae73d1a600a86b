/* `woolly bench --roofline` (bench_roofline.h). */
#include "bench_roofline.h"

#include <stdio.h>

#include "cli_common.h"
#include "context.h"
#include "machine_limits.h"
#include "tune.h"

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
    r->macs_layers = r->macs_output = 0.0;
    for (int i = 0; i < tm.n_shapes; i++) {
        const woolly_tune_shape *s = &tm.shapes[i];
        const double macs = (double)s->rows * (double)s->cols * s->n_tensors;
        /* A shape that never runs a large batch is the output matrix's (a prompt's logits are its last
         * token's; one that shares a layer matrix's shape is counted with the layers: an overcount of at
         * most one matrix per prompt). */
        if (s->classes[WOOLLY_TOKENS_LARGE])
            r->macs_layers += macs;
        else
            r->macs_output += macs;
    }
    woolly_tune_model_free(&tm);
    return 0;
}

int bench_measure_roof(const char *cmd, int threads, bench_roof *out)
{
    woolly_limits l;
    if (woolly_measure_limits(threads, &l)) {
        fprintf(stderr,
                "woolly %s: --roofline: cannot measure the machine's limits with %d threads (no memory "
                "for the read buffer of 4x the L3 and at least 256 MiB, or no thread pool)\n",
                cmd, threads);
        return -1;
    }
    *out = (bench_roof){
        .dram_read_gbs = l.dram_read_gbs, .int8_gmacs = l.int8_gmacs, .int8_instr = l.int8_instr};
    return 0;
}

void bench_apply_roof(const bench_run *r, const bench_roof *roof, bench_test *t)
{
    t->has_roof = true;
    t->roof = *roof;
    if (t->batched) {
        t->work_per_token = r->macs_layers + r->macs_output / t->n;
        t->work_rate = t->work_per_token * t->mean_ts / 1e9;
        t->limit = roof->int8_gmacs;
    } else {
        /* the token at depth + i reads depth + i + 1 positions: depth + (n + 1) / 2 on average */
        const double positions = t->depth + (t->n + 1) / 2.0;
        t->work_per_token = r->bytes_per_token + r->kv_bytes_per_position * positions;
        t->work_rate = t->work_per_token * t->mean_ts / 1e9;
        t->limit = roof->dram_read_gbs;
    }
}
