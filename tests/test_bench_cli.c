/* `woolly bench` end to end on the tiny Q4_K_M model: each output format parses and holds the tests
 * asked for with positive, consistent figures; a thread list gives one set of tests per count, a depth
 * list one per depth in llama-bench's order;
 * --roofline gives each figure as a percentage of a measured limit; bad flags are clear errors. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "isa.h"
#include "testutil.h"

static const char *tiny(void)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s", tu_data("models/tiny-llama-q4_k_m.gguf"));
    return path;
}

/* `woolly bench -m tiny ARGS`: expects success; returns stdout. */
static char *bench(const char *args)
{
    char cmd[8192], *out, *err;
    snprintf(cmd, sizeof cmd, "bench -m %s %s", tiny(), args);
    const int st = tu_run_cli(cmd, &out, &err);
    cr_assert_eq(st, 0, "woolly %s failed (%d):\n%s\n%s", cmd, st, out, err);
    free(err);
    return out;
}

/* Parses a JSON array of test objects; fails the test if it is not one with `n` elements. */
static json_t *parse_tests(const char *text, size_t n)
{
    json_error_t e;
    json_t *a = json_loads(text, 0, &e);
    cr_assert(a != NULL, "not JSON (line %d: %s):\n%s", e.line, e.text, text);
    cr_assert(json_is_array(a), "not an array:\n%s", text);
    cr_assert_eq(json_array_size(a), n, "%zu objects, expected %zu:\n%s", json_array_size(a), n, text);
    return a;
}

static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    cr_assert(json_is_number(v), "no number '%s'", key);
    return json_number_value(v);
}

static const char *str(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    cr_assert(json_is_string(v), "no string '%s'", key);
    return json_string_value(v);
}

/* A test object: its name, counts and figures, the mean and std those of its samples. */
static void check_test(const json_t *o, const char *name, int threads, int n_prompt, int n_gen, int depth,
                       int reps)
{
    cr_expect_str_eq(str(o, "test"), name);
    cr_expect_eq(num(o, "n_threads"), threads);
    cr_expect_eq(num(o, "n_prompt"), n_prompt);
    cr_expect_eq(num(o, "n_gen"), n_gen);
    cr_expect_eq(num(o, "n_depth"), depth);
    cr_expect_str_eq(str(o, "model"), "synthetic-llama-256x2");
    cr_expect_str_eq(str(o, "tune_profile"), "defaults", "ctest hides the machine's profile");
    cr_expect(strlen(str(o, "isa")) > 0);
    cr_expect_gt(num(o, "model_size"), 10e6, "tiny's 11.7 MiB of tensors");
    cr_expect_gt(num(o, "model_n_params"), 17e6);
    cr_expect_gt(num(o, "load_s"), 0.0);
    cr_expect_gt(num(o, "peak_rss_bytes"), num(o, "model_size") / 2, "the mapped weights are resident");
    const json_t *s = json_object_get(o, "samples_ts");
    cr_assert(json_is_array(s));
    cr_assert_eq(json_array_size(s), (size_t)reps);
    double sum = 0, sq = 0;
    for (size_t i = 0; i < json_array_size(s); i++) {
        const double x = json_number_value(json_array_get(s, i));
        cr_expect_gt(x, 0.0, "%s: sample %zu is %g t/s", name, i, x);
        sum += x;
    }
    const double mean = sum / reps;
    for (size_t i = 0; i < json_array_size(s); i++)
        sq += pow(json_number_value(json_array_get(s, i)) - mean, 2);
    cr_expect(fabs(num(o, "avg_ts") - mean) <= 1e-5 * mean + 1e-6, "%s: mean %g of samples, avg_ts %g", name,
              mean, num(o, "avg_ts"));
    const double sd = reps > 1 ? sqrt(sq / (reps - 1)) : 0.0;
    cr_expect(fabs(num(o, "stddev_ts") - sd) <= 1e-5 * mean + 1e-6, "%s: std %g, stddev_ts %g", name, sd,
              num(o, "stddev_ts"));
}

Test(bench_cli, json_has_one_object_per_test)
{
    char *out = bench("-p 16 -n 4 -r 2 -t 1 --format json");
    json_t *a = parse_tests(out, 2);
    check_test(json_array_get(a, 0), "pp16", 1, 16, 0, 0, 2);
    check_test(json_array_get(a, 1), "tg4", 1, 0, 4, 0, 2);
    cr_expect(json_object_get(json_array_get(a, 0), "roofline") == NULL, "no roofline without --roofline");
    json_decref(a);
    free(out);
}

Test(bench_cli, output_file_gets_the_results)
{
    char path[4096], args[8192];
    snprintf(path, sizeof path, "%s", tu_tmp_path("bench.json"));
    snprintf(args, sizeof args, "-p 4 -n 2 -r 1 -t 1 --format json -o %s", path);
    char *out = bench(args);
    cr_expect_eq(out[0], 0, "the results go to the file only:\n%s", out);
    char *text = tu_read_file(path, NULL);
    json_t *a = parse_tests(text, 2);
    check_test(json_array_get(a, 1), "tg2", 1, 0, 2, 0, 1);
    json_decref(a);
    free(text);
    free(out);
    remove(path);
}

Test(bench_cli, depth_names_the_tests_and_only_pp_when_n_is_0)
{
    char *out = bench("-p 8 -n 0 -d 12 -r 1 -t 2 --format json --kv-type q8_0");
    json_t *a = parse_tests(out, 1);
    check_test(json_array_get(a, 0), "pp8 @ d12", 2, 8, 0, 12, 1);
    cr_expect_str_eq(str(json_array_get(a, 0), "kv_type"), "q8_0");
    json_decref(a);
    free(out);
}

Test(bench_cli, depth_list_gives_each_test_at_each_depth_in_llama_bench_order)
{
    char *out = bench("-p 8 -n 2 -d 0,12 -r 2 -t 1 --format json");
    json_t *a = parse_tests(out, 4);
    check_test(json_array_get(a, 0), "pp8", 1, 8, 0, 0, 2);
    check_test(json_array_get(a, 1), "tg2", 1, 0, 2, 0, 2);
    check_test(json_array_get(a, 2), "pp8 @ d12", 1, 8, 0, 12, 2);
    check_test(json_array_get(a, 3), "tg2 @ d12", 1, 0, 2, 12, 2);
    json_decref(a);
    free(out);
}

/* Splits a CSV line of plain and quoted fields (quotes doubled inside) in place. Returns the count. */
static int csv_fields(char *line, char **f, int cap)
{
    int n = 0;
    char *p = line;
    while (n < cap) {
        if (*p == '"') {
            char *w = ++p;
            f[n++] = w;
            for (; *p && !(*p == '"' && p[1] != '"'); p++)
                *w++ = *p == '"' ? *++p : *p;
            *w = 0;
            p++;
        } else {
            f[n++] = p;
            p += strcspn(p, ",");
        }
        if (*p != ',')
            break;
        *p++ = 0;
    }
    return n;
}

Test(bench_cli, csv_has_a_header_and_one_line_per_test)
{
    char *out = bench("-p 16 -n 4 -r 3 -t 1,2 --format csv");
    char *lines[8];
    int n_lines = 0;
    for (char *save, *l = strtok_r(out, "\n", &save); l && n_lines < 8; l = strtok_r(NULL, "\n", &save))
        lines[n_lines++] = l;
    cr_assert_eq(n_lines, 5, "a header and 2 tests x 2 thread counts");
    char *head[32], *row[32];
    const int n_head = csv_fields(lines[0], head, 32);
    int c_test = -1, c_threads = -1, c_avg = -1, c_samples = -1;
    for (int i = 0; i < n_head; i++) {
        c_test = strcmp(head[i], "test") ? c_test : i;
        c_threads = strcmp(head[i], "n_threads") ? c_threads : i;
        c_avg = strcmp(head[i], "avg_ts") ? c_avg : i;
        c_samples = strcmp(head[i], "samples_ts") ? c_samples : i;
    }
    cr_assert(c_test >= 0 && c_threads >= 0 && c_avg >= 0 && c_samples >= 0, "missing columns");
    const char *want_test[] = {"pp16", "tg4", "pp16", "tg4"};
    const char *want_threads[] = {"1", "1", "2", "2"};
    for (int r = 0; r < 4; r++) {
        cr_assert_eq(csv_fields(lines[r + 1], row, 32), n_head, "line %d has another column count", r + 2);
        cr_expect_str_eq(row[c_test], want_test[r]);
        cr_expect_str_eq(row[c_threads], want_threads[r]);
        cr_expect_gt(strtod(row[c_avg], NULL), 0.0);
        int semis = 0;
        for (const char *p = row[c_samples]; *p; p++)
            semis += *p == ';';
        cr_expect_eq(semis, 2, "three samples: %s", row[c_samples]);
    }
    free(out);
}

/* The markdown rows of a table: lines starting with "| " that are neither the header nor the rule. */
static int md_rows(char *out, char **rows, int cap)
{
    int n = 0;
    for (char *save, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        if (!strncmp(l, "| ", 2) && !strstr(l, "| model") && !strstr(l, "| ---") && n < cap)
            rows[n++] = l;
    return n;
}

Test(bench_cli, markdown_thread_list_gives_one_row_per_count_and_the_run_facts)
{
    char *out = bench("-p 16 -n 4 -r 2 -t 1,2");
    cr_expect(strstr(out, "| model") && strstr(out, "| threads |") && strstr(out, "t/s |"), "%s", out);
    cr_expect(strstr(out, "load time: ") && strstr(out, "peak RSS: ") && strstr(out, "ISA level: ") &&
                  strstr(out, "weights: "), "%s",
              out);
    cr_expect(strstr(out, "tuning profile, 1 thread: defaults\n") &&
                  strstr(out, "tuning profile, 2 threads: defaults\n") && !strstr(out, "tuning profile: "),
              "one profile line per thread count, naming it:\n%s", out);
    char *copy = strdup(out), *rows[8];
    const int n = md_rows(copy, rows, 8);
    cr_assert_eq(n, 4, "2 tests x 2 thread counts:\n%s", out);
    const char *want[] = {"|       1 |          pp16 |", "|       1 |           tg4 |",
                          "|       2 |          pp16 |", "|       2 |           tg4 |"};
    for (int i = 0; i < 4; i++) {
        cr_expect(strstr(rows[i], want[i]) != NULL, "row %d: %s", i, rows[i]);
        const char *pm = strstr(rows[i], " ± ");
        cr_assert(pm != NULL, "%s", rows[i]);
        while (pm > rows[i] && pm[-1] != ' ')
            pm--;
        cr_expect_gt(strtod(pm, NULL), 0.0, "%s", rows[i]);
    }
    free(copy);
    free(out);
}

Test(bench_cli, roofline_gives_percentages_of_measured_limits)
{
    char *out = bench("-p 16 -n 4 -r 1 -t 1 --roofline --format json");
    json_t *a = parse_tests(out, 2);
    for (size_t i = 0; i < 2; i++) {
        const json_t *o = json_array_get(a, i), *r = json_object_get(o, "roofline");
        cr_assert(json_is_object(r), "test %zu has no roofline", i);
        cr_expect_gt(num(r, "dram_read_gbs"), 0.5, "DRAM read bandwidth");
        /* sampled after the warm-up round and after the one measured round; the limit is the best */
        cr_expect_eq(num(r, "limit_samples"), 2.0);
        cr_expect(num(r, "dram_read_gbs_low") > 0.0 && num(r, "dram_read_gbs_low") <= num(r, "dram_read_gbs"),
                  "lowest DRAM sample %g, best %g", num(r, "dram_read_gbs_low"), num(r, "dram_read_gbs"));
        cr_expect(num(r, "int8_gmacs_low") <= num(r, "int8_gmacs"), "lowest int8 sample %g, best %g",
                  num(r, "int8_gmacs_low"), num(r, "int8_gmacs"));
        const bool pp = i == 0;
        const double per_token = num(r, pp ? "macs_per_token" : "bytes_per_token");
        /* tiny: 2 layers of 256x256 (q, output), 128x256 (k, v) and 3 x 768x256; the 32000x256 output
         * matrix once per prompt (pp16) or per token (decode streams its Q6_K bytes too) */
        const double layer_macs = 2.0 * (2 * 256 * 256 + 2 * 128 * 256 + 3 * 768 * 256);
        if (pp)
            cr_expect(fabs(per_token - (layer_macs + 32000.0 * 256 / 16)) < 1, "%g MACs per token",
                      per_token);
        else
            cr_expect(per_token > 4e6 && per_token < num(o, "model_size"), "%g bytes per token", per_token);
        const double rate = per_token * num(o, "avg_ts") / 1e9;
        cr_expect(fabs(num(r, "work_rate") - rate) <= 1e-4 * rate + 1e-6, "work rate %g, expected %g",
                  num(r, "work_rate"), rate);
        /* the BF16 rate where the level has a BF16 dot product; tiny's Q4_K_M prompts are judged by int8 */
        const json_t *bf16_instr = json_object_get(r, "bf16_instr");
        cr_assert(json_is_string(bf16_instr), "no bf16_instr");
        if (strncmp(json_string_value(bf16_instr), "none", 4))
            cr_expect_gt(num(r, "bf16_gmacs"), 0.0, "%s measured nothing", json_string_value(bf16_instr));
        else
            cr_expect_eq(num(r, "bf16_gmacs"), 0.0);
        const json_t *f32_instr = json_object_get(r, "f32_instr");
        cr_assert(json_is_string(f32_instr), "no f32_instr");
        if (strncmp(json_string_value(f32_instr), "none", 4))
            cr_expect_gt(num(r, "f32_gmacs"), 0.0, "%s measured nothing", json_string_value(f32_instr));
        else
            cr_expect_eq(num(r, "f32_gmacs"), 0.0);
        const double limit = num(r, pp ? "int8_gmacs" : "dram_read_gbs");
        cr_expect_eq(num(r, "limit"), limit);
        if (limit > 0) {
            cr_expect(fabs(num(r, "percent_of_limit") - 100 * rate / limit) <
                      1e-3 * (100 * rate / limit) + 1e-6);
            cr_expect_gt(num(r, "percent_of_limit"), 0.0);
        } else { /* the scalar level has no int8 dot product to be judged against */
            cr_expect(json_is_null(json_object_get(r, "percent_of_limit")));
        }
    }
    json_decref(a);
    free(out);

    out = bench("-p 16 -n 4 -r 1 -t 1 --roofline");
    cr_expect(strstr(out, "% of limit |") != NULL, "%s", out);
    cr_expect(strstr(out, "machine limits, 1 thread: DRAM read ") != NULL, "%s", out);
    cr_expect(strstr(out, "; the best of 2 samples between the rounds (the lowest: DRAM read ") != NULL, "%s",
              out);
    cr_expect(strstr(out, "roofline: decode reads ") != NULL, "%s", out);
    char *rows[4];
    cr_assert_eq(md_rows(out, rows, 4), 2, "%s", out);
    cr_expect(strstr(rows[1], " GB/s |") != NULL && strstr(rows[1], "% |") != NULL, "tg row: %s", rows[1]);
    cr_expect(strstr(rows[0], " GMAC/s |") != NULL, "pp row: %s", rows[0]);
    free(out);
}

/* An F16 model's prompt multiplies-adds in F32: it is judged against the FMA rate, not the int8 one. */
Test(bench_cli, roofline_judges_float_weights_by_the_fma_rate)
{
    char cmd[8192], *out, *err;
    snprintf(cmd, sizeof cmd, "bench -m %s -p 16 -n 0 -r 1 -t 1 --roofline --format json",
             tu_data("models/tiny-llama-f16.gguf"));
    int st = tu_run_cli(cmd, &out, &err);
    cr_assert_eq(st, 0, "woolly %s failed (%d):\n%s\n%s", cmd, st, out, err);
    json_t *a = parse_tests(out, 1);
    const json_t *r = json_object_get(json_array_get(a, 0), "roofline");
    cr_assert(json_is_object(r), "%s", out);
    cr_expect_eq(num(r, "limit"), num(r, "f32_gmacs"), "limit %g, f32 %g, int8 %g", num(r, "limit"),
                 num(r, "f32_gmacs"), num(r, "int8_gmacs"));
    if (num(r, "f32_gmacs") > 0)
        cr_expect_gt(num(r, "percent_of_limit"), 0.0);
    json_decref(a);
    free(out), free(err);

    snprintf(cmd, sizeof cmd, "bench -m %s -p 16 -n 0 -r 1 -t 1 --roofline", tu_data("models/tiny-llama-f16.gguf"));
    st = tu_run_cli(cmd, &out, &err);
    cr_assert_eq(st, 0, "woolly %s failed:\n%s", cmd, err);
    cr_expect(strstr(out, "(GMAC/s against the f32 rate)") != NULL, "%s", out);
    free(out), free(err);
}

/* A BF16 model's prompt is judged against the level's BF16 dot product where it has one; where it has
 * none (the avx2 level here, whatever the CPU) its kernels widen the weights to F32 for the FMA, and the
 * FMA rate is the limit: never "no limit". */
static void expect_bf16_prompt_limit(const char *model, const char *level)
{
    const int isa = level ? woolly_isa_from_name(level) : 0;
    if (isa < 0 || (level && !woolly_isa_cpu_has(woolly_cpu_get(), (enum woolly_isa)isa)))
        return; /* the level is refused on such a CPU (test_isa_levels) */
    if (level)
        setenv("WOOLLY_ISA", level, 1); /* the shell tu_run_cli starts passes it on */
    char cmd[8192], *out, *err;
    snprintf(cmd, sizeof cmd, "bench -m %s -p 16 -n 0 -r 1 -t 1 --roofline --format json", model);
    const int st = tu_run_cli(cmd, &out, &err);
    unsetenv("WOOLLY_ISA");
    cr_assert_eq(st, 0, "WOOLLY_ISA=%s woolly %s failed (%d):\n%s\n%s", level ? level : "", cmd, st, out,
                 err);
    json_t *a = parse_tests(out, 1);
    const json_t *r = json_object_get(json_array_get(a, 0), "roofline");
    cr_assert(json_is_object(r), "%s", out);
    const bool has_bf16 = num(r, "bf16_gmacs") > 0;
    if (level && !strcmp(level, "avx2"))
        cr_expect(!has_bf16, "the avx2 level measured a BF16 rate (%s)", str(r, "bf16_instr"));
    const double expected = has_bf16 ? num(r, "bf16_gmacs") : num(r, "f32_gmacs");
    cr_expect_gt(expected, 0.0, "%s: no BF16 or F32 rate measured", cmd);
    cr_expect_eq(num(r, "limit"), expected, "%s: limit %g, bf16 %g, f32 %g", cmd, num(r, "limit"),
                 num(r, "bf16_gmacs"), num(r, "f32_gmacs"));
    cr_expect_gt(num(r, "percent_of_limit"), 0.0, "%s", cmd);
    json_decref(a);
    free(out), free(err);
}

Test(bench_cli, roofline_judges_bf16_weights_by_the_rate_their_kernels_run_at)
{
    char model[4096], args[8192];
    snprintf(model, sizeof model, "%s", tu_tmp_path("bench-bf16.gguf"));
    snprintf(args, sizeof args, "quantize -q %s %s BF16", tu_data("models/tiny-llama-f16.gguf"), model);
    char *err;
    const int st = tu_run_cli(args, NULL, &err);
    cr_assert_eq(st, 0, "woolly %s failed:\n%s", args, err);
    free(err);
    expect_bf16_prompt_limit(model, NULL);
    expect_bf16_prompt_limit(model, "avx2");
}

/* Decode at a depth reads the cache too: tiny's K and V are 128 values per layer and position each (its
 * attn_k is 128x256), over 2 layers: 1024 bytes per position in F16, 4 Q8_0 blocks of 34 bytes per K or
 * V and layer in Q8_0. A token of tg4 at depth 8 reads 8 + 2.5 positions on average. */
Test(bench_cli, roofline_counts_the_kv_cache_a_decode_reads)
{
    static const struct {
        const char *kv;
        double per_position;
    } CASES[] = {{"f16", 2 * 2 * 128 * 2.0}, {"q8_0", 2 * 2 * 4 * 34.0}};
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        char args[256];
        snprintf(args, sizeof args, "-p 0 -n 4 -d 8 -r 1 -t 1 --kv-type %s --roofline --format json",
                 CASES[c].kv);
        char *out = bench(args);
        json_t *a = parse_tests(out, 1);
        const json_t *r = json_object_get(json_array_get(a, 0), "roofline");
        cr_assert(json_is_object(r), "%s", out);
        cr_expect_eq(num(r, "kv_bytes_per_position"), CASES[c].per_position,
                     "%s cache: %g bytes per position", CASES[c].kv, num(r, "kv_bytes_per_position"));
        const double want = num(r, "weight_bytes_per_token") + CASES[c].per_position * (8 + 2.5);
        cr_expect(fabs(num(r, "bytes_per_token") - want) < 1e-6 * want,
                  "%s cache: %g bytes per token, expected %g", CASES[c].kv, num(r, "bytes_per_token"), want);
        json_decref(a);
        free(out);
    }
}

/* A sliding-window layer's token reads at most its window of the cache: tiny-gemma3-f16's layers 0 and 2
 * slide over 16 positions, 1 and 3 are global; K and V are 2 heads of 64 per layer, 512 bytes per layer
 * and position in F16. At depth 32 a token of tg4 reads 32 + 2.5 positions of a global layer on average
 * and 16 of a sliding one (all four tokens are past the window). */
Test(bench_cli, roofline_counts_a_sliding_window_once)
{
    char cmd[8192], *out, *err;
    snprintf(cmd, sizeof cmd, "bench -m %s -p 0 -n 4 -d 32 -r 1 -t 1 --roofline --format json",
             tu_data("models/tiny-gemma3-f16.gguf"));
    int st = tu_run_cli(cmd, &out, &err);
    cr_assert_eq(st, 0, "woolly %s failed (%d):\n%s\n%s", cmd, st, out, err);
    json_t *a = parse_tests(out, 1);
    const json_t *r = json_object_get(json_array_get(a, 0), "roofline");
    cr_assert(json_is_object(r), "%s", out);
    cr_expect_eq(num(r, "kv_bytes_per_position"), 4 * 512.0);
    cr_expect_eq(num(r, "kv_layers"), 4);
    cr_expect_eq(num(r, "kv_sliding_layers"), 2);
    cr_expect_eq(num(r, "kv_window"), 16);
    const double want = num(r, "weight_bytes_per_token") + 512.0 * (2 * (32 + 2.5) + 2 * 16);
    cr_expect(fabs(num(r, "bytes_per_token") - want) < 1e-6 * want, "%g bytes per token, expected %g",
              num(r, "bytes_per_token"), want);
    json_decref(a);
    free(out), free(err);

    snprintf(cmd, sizeof cmd, "bench -m %s -p 0 -n 4 -d 32 -r 1 -t 1 --roofline",
             tu_data("models/tiny-gemma3-f16.gguf"));
    st = tu_run_cli(cmd, &out, &err);
    cr_assert_eq(st, 0, "woolly %s failed:\n%s", cmd, err);
    cr_expect(strstr(out, "2 of the 4 layers read at most the last 16 positions") != NULL, "%s", out);
    free(out), free(err);
}

/* A mixture of experts' token reads the k experts its router chose, not all n: tiny-mixtral-f16 has 2
 * layers of F16 attention (q and output 128x128, k and v 64x128), an F32 router of 8 x 128 and 8 experts
 * of 3 F16 128x128 matrices, 2 of them a token, and an F16 output matrix of 4000 x 128. */
Test(bench_cli, roofline_counts_the_experts_a_token_reads)
{
    char cmd[8192], *out, *err;
    snprintf(cmd, sizeof cmd, "bench -m %s -p 16 -n 2 -r 1 -t 1 --roofline --format json",
             tu_data("models/tiny-mixtral-f16.gguf"));
    const int st = tu_run_cli(cmd, &out, &err);
    cr_assert_eq(st, 0, "woolly %s failed (%d):\n%s\n%s", cmd, st, out, err);
    json_t *a = parse_tests(out, 2);
    const double attn = 2.0 * 128 * 128 + 2.0 * 64 * 128, router = 8.0 * 128, expert = 3.0 * 128 * 128;
    const json_t *pp = json_object_get(json_array_get(a, 0), "roofline");
    const json_t *tg = json_object_get(json_array_get(a, 1), "roofline");
    cr_assert(json_is_object(pp) && json_is_object(tg), "%s", out);
    const double macs = 2 * (attn + router + 2 * expert) + 4000.0 * 128 / 16;
    cr_expect(fabs(num(pp, "macs_per_token") - macs) < 1, "%g MACs per token, expected %g (2 of 8 experts)",
              num(pp, "macs_per_token"), macs);
    const double bytes = 2 * (2 * attn + 4 * router + 2 * 2 * expert) + 2 * 4000.0 * 128;
    cr_expect(fabs(num(tg, "weight_bytes_per_token") - bytes) < 1, "%g weight bytes per token, expected %g",
              num(tg, "weight_bytes_per_token"), bytes);
    cr_expect_eq(num(tg, "experts"), 8);
    cr_expect_eq(num(tg, "experts_used"), 2);
    cr_expect_eq(num(tg, "expert_bytes"), 2 * 8 * 2 * expert);
    json_decref(a);
    free(out), free(err);

    snprintf(cmd, sizeof cmd, "bench -m %s -p 0 -n 2 -r 1 -t 1 --roofline", tu_data("models/tiny-mixtral-f16.gguf"));
    cr_assert_eq(tu_run_cli(cmd, &out, &err), 0, "woolly %s failed:\n%s", cmd, err);
    cr_expect(strstr(out, "reads 2 of each layer's 8 experts") != NULL, "%s", out);
    free(out), free(err);
}

/* `woolly bench -m tiny ARGS` must fail with exit status 2 and a message containing `needle`. */
static void expect_usage_error(const char *args, const char *needle)
{
    char cmd[8192], *out, *err;
    snprintf(cmd, sizeof cmd, "bench -m %s %s", tiny(), args);
    const int st = tu_run_cli(cmd, &out, &err);
    cr_expect_eq(st, 2, "woolly %s: exit status %d, expected 2", cmd, st);
    cr_expect(strstr(err, needle) != NULL, "woolly %s: stderr does not say '%s':\n%s", cmd, needle, err);
    cr_expect_eq(out[0], 0, "nothing on stdout after an error:\n%s", out);
    free(out);
    free(err);
}

Test(bench_cli, bad_flags_are_clear_errors)
{
    expect_usage_error("-t 0", "-t 0: each thread count must be an integer from 1");
    expect_usage_error("-t 1,,2", "-t 1,,2: each thread count");
    expect_usage_error("-t 2,x", "-t 2,x: each thread count");
    expect_usage_error("-t 99999", "from 1 to");
    expect_usage_error("--format xml", "--format 'xml'");
    expect_usage_error("-p 16 -n 4 -d 600 -c 512", "the tests need 616 positions (-d 600 + 16 tokens), more "
                                                   "than --ctx-size 512");
    expect_usage_error("-d -1", "-d -1: each depth must be an integer from 0");
    expect_usage_error("-d 0,,8", "-d 0,,8: each depth");
    expect_usage_error("-d 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", "at most 16 depths");
    expect_usage_error("-p 16 -n 4 -d 0,600 -c 512", "the tests need 616 positions (-d 600 + 16 tokens)");
    expect_usage_error("-r 0", "-r 0 is out of range");
    char args[8192];
    snprintf(args, sizeof args, "-o %s", tiny());
    expect_usage_error(args, "refusing to overwrite it");
}
