/* `woolly bench`'s output formats (bench_report.h). */
#include "bench_report.h"

#include <math.h>
#include <string.h>

const char *bench_rate_name(bench_rate rate)
{
    static const char *const names[] = {[BENCH_RATE_INT8] = "int8", [BENCH_RATE_BF16] = "bf16",
                                        [BENCH_RATE_F32] = "f32"};
    return names[rate];
}

void bench_test_stats(bench_test *t)
{
    double sum = 0.0;
    for (int i = 0; i < t->n_samples; i++)
        sum += t->samples_ts[i];
    t->mean_ts = t->n_samples ? sum / t->n_samples : 0.0;
    double var = 0.0;
    for (int i = 0; i < t->n_samples; i++)
        var += (t->samples_ts[i] - t->mean_ts) * (t->samples_ts[i] - t->mean_ts);
    t->std_ts = t->n_samples > 1 ? sqrt(var / (t->n_samples - 1)) : 0.0;
}

/* The unit of a test's work rate: weights streamed for decode, multiply-adds for prefill. */
static const char *work_unit(const bench_test *t)
{
    return t->batched ? "GMAC/s" : "GB/s";
}

/* ---- markdown --------------------------------------------------------------------------------------- */

static void format_size(char *out, size_t cap, uint64_t bytes)
{
    const double b = (double)bytes;
    if (b >= 1024.0 * 1024.0 * 1024.0)
        snprintf(out, cap, "%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
    else
        snprintf(out, cap, "%.2f MiB", b / (1024.0 * 1024.0));
}

static void format_count(char *out, size_t cap, double x)
{
    if (x >= 1e9)
        snprintf(out, cap, "%.2f B", x / 1e9);
    else if (x >= 1e6)
        snprintf(out, cap, "%.2f M", x / 1e6);
    else
        snprintf(out, cap, "%.2f K", x / 1e3);
}

void bench_md_header(FILE *f, bool roofline)
{
    fprintf(f, "| %-30s | %10s | %10s | %-12s | %7s | %13s | %20s |", "model", "size", "params", "backend",
            "threads", "test", "t/s");
    if (roofline)
        fprintf(f, " %14s | %10s |", "work/s", "% of limit");
    /* Column widths as in the header; right-aligned columns end their rule with ':'. */
    const char *dashes = "------------------------------";
    fprintf(f, "\n| %.30s | %.9s: | %.9s: | %.12s | %.6s: | %.12s: | %.19s: |", dashes, dashes, dashes,
            dashes, dashes, dashes, dashes);
    if (roofline)
        fprintf(f, " %.13s: | %.9s: |", dashes, dashes);
    fputc('\n', f);
    fflush(f);
}

void bench_md_row(FILE *f, const bench_run *r, const bench_test *t)
{
    char size[32], params[32], backend[32], result[48];
    format_size(size, sizeof size, r->model_size);
    format_count(params, sizeof params, (double)r->model_params);
    snprintf(backend, sizeof backend, "CPU (%s)", r->isa);
    snprintf(result, sizeof result, "%.2f ± %.2f", t->mean_ts, t->std_ts);
    /* "±" takes two bytes of the field width */
    fprintf(f, "| %-30.30s | %10s | %10s | %-12s | %7d | %13s | %21s |", r->model_name, size, params, backend,
            t->threads, t->name, result);
    if (t->has_roof) {
        char rate[32], pct[16];
        snprintf(rate, sizeof rate, "%.2f %s", t->work_rate, work_unit(t));
        if (t->limit > 0)
            snprintf(pct, sizeof pct, "%.1f%%", 100.0 * t->work_rate / t->limit);
        else
            snprintf(pct, sizeof pct, "n/a");
        fprintf(f, " %14s | %10s |", rate, pct);
    }
    fputc('\n', f);
    fflush(f);
}

static double spec_acceptance(const bench_spec *s)
{
    return s->drafted > 0 ? (double)s->accepted / (double)s->drafted : 0.0;
}

static double spec_tokens_per_step(const bench_spec *s)
{
    return s->steps > 0 ? (double)s->tokens / (double)s->steps : 0.0;
}

static void spec_md_line(FILE *f, const bench_test *t)
{
    const bench_spec *s = &t->spec;
    fprintf(f,
            "speculative %s, %d thread%s: greedy after a %d-token prompt, %s%s%s%s, draft-max %d: %lld drafted, "
            "%lld accepted (%.1f%%), %.2f tokens per step (one target pass each)\n",
            t->name, t->threads, t->threads == 1 ? "" : "s", s->n_prompt, s->draft ? "draft " : "",
            s->draft ? s->draft : "", s->draft && s->lookup ? " and " : "", s->lookup ? "lookup" : "",
            s->draft_max, (long long)s->drafted, (long long)s->accepted, 100.0 * spec_acceptance(s),
            spec_tokens_per_step(s));
}

void bench_md_footer(FILE *f, const bench_run *r)
{
    fprintf(f, "\nload time: %.3f s\nweights: %s\nISA level: %s\nKV cache: %s\n", r->load_s, r->weights,
            r->isa, r->kv_type);
    /* A profile is chosen per thread count: with several counts, one line each, naming the count. */
    bool several = false;
    for (int i = 1; i < r->n_tests; i++)
        several |= r->tests[i].threads != r->tests[0].threads;
    for (int i = 0; i < r->n_tests; i++) {
        if (i > 0 && r->tests[i].threads == r->tests[i - 1].threads)
            continue;
        if (several)
            fprintf(f, "tuning profile, %d thread%s: %s\n", r->tests[i].threads,
                    r->tests[i].threads == 1 ? "" : "s", r->tests[i].profile);
        else
            fprintf(f, "tuning profile: %s\n", r->tests[i].profile);
    }
    fprintf(f, "peak RSS: %.2f MiB\n", (double)r->peak_rss / (1024.0 * 1024.0));
    for (int i = 0; i < r->n_tests; i++)
        if (r->tests[i].speculative)
            spec_md_line(f, &r->tests[i]);
    if (!r->roofline)
        return;
    char macs[32], out_macs[32];
    format_count(macs, sizeof macs, r->macs_layers);
    format_count(out_macs, sizeof out_macs, r->macs_output);
    fprintf(f,
            "roofline: decode reads %.2f MiB of weights per token and %.2f KiB of KV cache per cached "
            "position (GB/s against DRAM read bandwidth); prefill does %s multiply-adds per token plus %s "
            "for the output matrix on the last token (GMAC/s against the %s rate)\n",
            r->bytes_per_token / (1024.0 * 1024.0), r->kv_bytes_per_position / 1024.0, macs, out_macs,
            bench_rate_name(r->prompt_rate));
    if (r->kv_sliding_layers > 0)
        fprintf(f,
                "roofline: sliding-window attention: %d of the %d layers read at most the last %d positions "
                "of their cache (the KV bytes per position above are all layers')\n",
                r->kv_sliding_layers, r->kv_layers, (int)r->kv_window);
    if (r->n_expert > 0)
        fprintf(f,
                "roofline: a mixture of experts: a token reads %d of each layer's %d experts, so the weights "
                "per token are the shared matrices plus %.2f of the experts' %.2f MiB (the active bytes; "
                "the decode limit is active bytes / DRAM bandwidth)\n",
                r->n_expert_used, r->n_expert, r->expert_bytes * r->n_expert_used / r->n_expert / (1024.0 * 1024.0),
                r->expert_bytes / (1024.0 * 1024.0));
    for (int i = 0; i < r->n_tests; i++) {
        const bench_test *t = &r->tests[i];
        if (!t->has_roof || (i > 0 && t->threads == r->tests[i - 1].threads))
            continue;
        fprintf(f, "machine limits, %d thread%s: DRAM read %.2f GB/s, int8 ", t->threads,
                t->threads == 1 ? "" : "s", t->roof.dram_read_gbs);
        if (t->roof.int8_gmacs > 0)
            fprintf(f, "%.1f GMAC/s (%s)", t->roof.int8_gmacs, t->roof.int8_instr);
        else
            fprintf(f, "%s", t->roof.int8_instr ? t->roof.int8_instr : "not measured");
        if (t->roof.bf16_gmacs > 0)
            fprintf(f, ", bf16 %.1f GMAC/s (%s)", t->roof.bf16_gmacs, t->roof.bf16_instr);
        if (t->roof.f32_gmacs > 0)
            fprintf(f, ", f32 %.1f GMAC/s (%s)", t->roof.f32_gmacs, t->roof.f32_instr);
        fprintf(f, "; the best of %d samples between the rounds (the lowest: DRAM read %.2f GB/s",
                t->roof.samples, t->roof.dram_read_low_gbs);
        if (t->roof.int8_gmacs > 0)
            fprintf(f, ", int8 %.1f GMAC/s", t->roof.int8_low_gmacs);
        fputs(")\n", f);
    }
    for (int i = 0; i < r->n_tests; i++)
        if (r->tests[i].has_roof && r->tests[i].limit > 0 && r->tests[i].work_rate > r->tests[i].limit) {
            fprintf(f,
                    "note: a figure over 100%% means its limit was measured low (a busy machine: run again "
                    "when it is quiet) or, for decode, that the weights fit in the caches\n");
            break;
        }
}

/* ---- JSON --------------------------------------------------------------------------------------------- */

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* A finite number (JSON has no NaN or infinity): null otherwise. */
static void json_number(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.6f", x);
    else
        fputs("null", f);
}

void bench_write_json(FILE *f, const bench_run *r)
{
    fputs("[\n", f);
    for (int i = 0; i < r->n_tests; i++) {
        const bench_test *t = &r->tests[i];
        fputs("  {\n    \"model\": ", f);
        json_string(f, r->model_name);
        fputs(",\n    \"model_filename\": ", f);
        json_string(f, r->model_path);
        fprintf(f, ",\n    \"model_size\": %llu,\n    \"model_n_params\": %llu,\n",
                (unsigned long long)r->model_size, (unsigned long long)r->model_params);
        fputs("    \"backend\": \"CPU\",\n    \"isa\": ", f);
        json_string(f, r->isa);
        fputs(",\n    \"kv_type\": ", f);
        json_string(f, r->kv_type);
        fprintf(
            f, ",\n    \"n_threads\": %d,\n    \"n_prompt\": %d,\n    \"n_gen\": %d,\n    \"n_depth\": %d,\n",
            t->threads, t->batched ? t->n : 0, t->batched ? 0 : t->n, t->depth);
        fputs("    \"test\": ", f);
        json_string(f, t->name);
        fputs(",\n    \"avg_ts\": ", f);
        json_number(f, t->mean_ts);
        fputs(",\n    \"stddev_ts\": ", f);
        json_number(f, t->std_ts);
        fputs(",\n    \"samples_ts\": [", f);
        for (int s = 0; s < t->n_samples; s++) {
            if (s)
                fputs(", ", f);
            json_number(f, t->samples_ts[s]);
        }
        fprintf(f, "],\n    \"load_s\": ");
        json_number(f, r->load_s);
        fputs(",\n    \"weights\": ", f);
        json_string(f, r->weights);
        fprintf(f,
                ",\n    \"peak_rss_bytes\": %llu,\n    \"tune_profile\": ", (unsigned long long)r->peak_rss);
        json_string(f, t->profile);
        if (t->speculative) {
            fprintf(f, ",\n    \"speculative\": {\"prompt\": %d, \"draft\": ", t->spec.n_prompt);
            if (t->spec.draft)
                json_string(f, t->spec.draft);
            else
                fputs("null", f);
            fprintf(f,
                    ", \"lookup\": %d, \"draft_max\": %d, \"drafted\": %lld, \"accepted\": %lld, \"steps\": "
                    "%lld, \"tokens\": %lld, \"acceptance\": ",
                    t->spec.lookup, t->spec.draft_max, (long long)t->spec.drafted, (long long)t->spec.accepted,
                    (long long)t->spec.steps, (long long)t->spec.tokens);
            json_number(f, spec_acceptance(&t->spec));
            fputs(", \"tokens_per_step\": ", f);
            json_number(f, spec_tokens_per_step(&t->spec));
            fputc('}', f);
        }
        if (t->has_roof) {
            fputs(",\n    \"roofline\": {\"dram_read_gbs\": ", f);
            json_number(f, t->roof.dram_read_gbs);
            fputs(", \"int8_gmacs\": ", f);
            json_number(f, t->roof.int8_gmacs);
            fputs(", \"int8_instr\": ", f);
            json_string(f, t->roof.int8_instr);
            fputs(", \"bf16_gmacs\": ", f);
            json_number(f, t->roof.bf16_gmacs);
            fputs(", \"bf16_instr\": ", f);
            json_string(f, t->roof.bf16_instr);
            fputs(", \"f32_gmacs\": ", f);
            json_number(f, t->roof.f32_gmacs);
            fputs(", \"f32_instr\": ", f);
            json_string(f, t->roof.f32_instr);
            fprintf(f, ", \"limit_samples\": %d, \"dram_read_gbs_low\": ", t->roof.samples);
            json_number(f, t->roof.dram_read_low_gbs);
            fputs(", \"int8_gmacs_low\": ", f);
            json_number(f, t->roof.int8_low_gmacs);
            fputs(t->batched ? ", \"macs_per_token\": " : ", \"bytes_per_token\": ", f);
            json_number(f, t->work_per_token);
            if (!t->batched) {
                fputs(", \"weight_bytes_per_token\": ", f);
                json_number(f, r->bytes_per_token);
                fputs(", \"kv_bytes_per_position\": ", f);
                json_number(f, r->kv_bytes_per_position);
                if (r->kv_sliding_layers > 0)
                    fprintf(f, ", \"kv_layers\": %d, \"kv_sliding_layers\": %d, \"kv_window\": %d", r->kv_layers,
                            r->kv_sliding_layers, (int)r->kv_window);
                if (r->n_expert > 0) {
                    fprintf(f, ", \"experts\": %d, \"experts_used\": %d, \"expert_bytes\": ", r->n_expert,
                            r->n_expert_used);
                    json_number(f, r->expert_bytes);
                }
            }
            fputs(", \"work_rate\": ", f);
            json_number(f, t->work_rate);
            fputs(", \"work_unit\": ", f);
            json_string(f, work_unit(t));
            fputs(", \"limit\": ", f);
            json_number(f, t->limit);
            fputs(", \"percent_of_limit\": ", f);
            json_number(f, t->limit > 0 ? 100.0 * t->work_rate / t->limit : NAN);
            fputc('}', f);
        }
        fprintf(f, "\n  }%s\n", i + 1 < r->n_tests ? "," : "");
    }
    fputs("]\n", f);
    fflush(f);
}

/* ---- CSV ---------------------------------------------------------------------------------------------- */

static void csv_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const char *p = s ? s : ""; *p; p++) {
        if (*p == '"')
            fputc('"', f);
        fputc(*p, f);
    }
    fputc('"', f);
}

void bench_write_csv(FILE *f, const bench_run *r)
{
    fputs("model,model_filename,model_size,model_n_params,backend,isa,kv_type,n_threads,n_prompt,n_gen,"
          "n_depth,test,avg_ts,stddev_ts,samples_ts,load_s,peak_rss_bytes,tune_profile",
          f);
    if (r->roofline)
        fputs(",dram_read_gbs,int8_gmacs,work_rate,work_unit,limit,percent_of_limit", f);
    if (r->speculative)
        fputs(",spec_prompt,spec_draft,spec_lookup,spec_draft_max,spec_drafted,spec_accepted,spec_steps,"
              "spec_tokens,spec_acceptance,spec_tokens_per_step",
              f);
    fputc('\n', f);
    for (int i = 0; i < r->n_tests; i++) {
        const bench_test *t = &r->tests[i];
        csv_string(f, r->model_name);
        fputc(',', f);
        csv_string(f, r->model_path);
        fprintf(f, ",%llu,%llu,CPU,%s,%s,%d,%d,%d,%d,", (unsigned long long)r->model_size,
                (unsigned long long)r->model_params, r->isa, r->kv_type, t->threads, t->batched ? t->n : 0,
                t->batched ? 0 : t->n, t->depth);
        csv_string(f, t->name);
        fprintf(f, ",%.6f,%.6f,\"", t->mean_ts, t->std_ts);
        for (int s = 0; s < t->n_samples; s++)
            fprintf(f, "%s%.6f", s ? ";" : "", t->samples_ts[s]);
        fprintf(f, "\",%.6f,%llu,", r->load_s, (unsigned long long)r->peak_rss);
        csv_string(f, t->profile);
        if (r->roofline) {
            fprintf(f, ",%.6f,%.6f,%.6f,%s,%.6f,", t->roof.dram_read_gbs, t->roof.int8_gmacs, t->work_rate,
                    work_unit(t), t->limit);
            if (t->limit > 0)
                fprintf(f, "%.4f", 100.0 * t->work_rate / t->limit);
        }
        if (r->speculative && t->speculative) {
            fprintf(f, ",%d,", t->spec.n_prompt);
            csv_string(f, t->spec.draft);
            fprintf(f, ",%d,%d,%lld,%lld,%lld,%lld,%.6f,%.6f", t->spec.lookup, t->spec.draft_max,
                    (long long)t->spec.drafted, (long long)t->spec.accepted, (long long)t->spec.steps,
                    (long long)t->spec.tokens, spec_acceptance(&t->spec), spec_tokens_per_step(&t->spec));
        } else if (r->speculative) {
            fputs(",,,,,,,,,,", f);
        }
        fputc('\n', f);
    }
    fflush(f);
}
