/* `woolly info` end to end: the numbers it prints for a model and a vocabulary, and its errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char *run_ok(const char *rel, const char *flags)
{
    char args[4096];
    snprintf(args, sizeof args, "info %s '%s'", flags, tu_data(rel));
    char *out = NULL, *err = NULL;
    int rc = tu_run_cli(args, &out, &err);
    cr_assert_eq(rc, 0, "woolly %s exited %d: %s", args, rc, err);
    free(err);
    return out;
}

/* The line starting (after indentation) with `label` contains `value`. */
static void assert_line(const char *out, const char *label, const char *value)
{
    const char *p = out;
    while ((p = strstr(p, label)) != NULL) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line - 1 ? n : sizeof line - 1), p);
        if (strstr(line, value))
            return;
        p += strlen(label);
    }
    cr_assert_fail("no line '%s ... %s' in:\n%s", label, value, out);
}

Test(gguf_info, tiny_llama_q4_k_m)
{
    char *out = run_ok("models/tiny-llama-q4_k_m.gguf", "");
    assert_line(out, "architecture:", "llama");
    assert_line(out, "embedding_length", "256");
    assert_line(out, "feed_forward_length", "768");
    assert_line(out, "block_count", "2");
    assert_line(out, "attention.head_count_kv", "2");
    assert_line(out, "context_length", "512");
    assert_line(out, "rope.freq_base", "10000");
    assert_line(out, "rope.dimension_count", "64");
    assert_line(out, "layer_norm_rms_epsilon", "1e-05");
    assert_line(out, "model ", "\"llama\"");
    assert_line(out, "pre ", "\"default\"");
    assert_line(out, "vocab size", "32000");
    assert_line(out, "file_type", "15 (MOSTLY_Q4_K_M)");
    assert_line(out, "tensors:", "21");
    assert_line(out, "output.weight ", "Q6_K  [256, 32000]");
    assert_line(out, "output.weight ", "6720000");
    assert_line(out, "blk.1.ffn_down.weight", "Q6_K  [768, 256]");
    assert_line(out, "blk.0.ffn_down.weight", "Q4_K  [768, 256]");
    assert_line(out, "output_norm.weight", "F32   [256]");
    /* 13 Q4_K matrices at 4.5 bits, 3 Q6_K at 6.5625, 5 norms in F32. */
    assert_line(out, "Q4_K ", "13 tensors");
    assert_line(out, "Q4_K ", "4.500 bits/weight");
    assert_line(out, "Q6_K ", "6.562 bits/weight");
    assert_line(out, "total:", "21 tensors, 17958144 weights, 12276992 bytes");
    assert_line(out, "total:", "5.469 bits per weight");
    free(out);
}

Test(gguf_info, granite_scales)
{
    char *out = run_ok("models/tiny-granite-q4_k_m.gguf", "");
    assert_line(out, "architecture:", "granite");
    assert_line(out, "embedding_scale", "12");
    assert_line(out, "residual_scale", "0.22");
    assert_line(out, "attention.scale", "0.0078125");
    assert_line(out, "logit_scale", "16");
    assert_line(out, "rope.freq_base", "1e+07");
    assert_line(out, "model ", "\"gpt2\"");
    assert_line(out, "pre ", "\"starcoder\"");
    assert_line(out, "vocab size", "49152");
    assert_line(out, "merges", "48872");
    assert_line(out, "tensors:", "20");
    free(out);
}

Test(gguf_info, stories260K_f32)
{
    char *out = run_ok("models/stories260K.gguf", "");
    assert_line(out, "embedding_length", "64");
    assert_line(out, "block_count", "5");
    assert_line(out, "attention.head_count ", "8");
    assert_line(out, "feed_forward_length", "172");
    assert_line(out, "vocab size", "512");
    assert_line(out, "total:", "48 tensors, 292800 weights, 1171200 bytes");
    assert_line(out, "total:", "32.000 bits per weight");
    cr_assert_null(strstr(out, "rope.freq_base"), "stories260K has no rope.freq_base key");
    free(out);
}

Test(gguf_info, vocab_only_file)
{
    char *out = run_ok("vocab/ggml-vocab-gpt-2.gguf", "--kv");
    assert_line(out, "architecture:", "gpt2");
    assert_line(out, "model ", "\"gpt2\"");
    assert_line(out, "pre ", "\"gpt-2\"");
    assert_line(out, "vocab size", "50257");
    assert_line(out, "merges", "50000");
    assert_line(out, "bos_token_id", "50256");
    assert_line(out, "tensors:", "0");
    assert_line(out, "tokenizer.ggml.tokens (array)", "[string x 50257]");
    cr_assert_null(strstr(out, "total:"));
    free(out);
}

Test(gguf_info, help)
{
    char *out = NULL;
    cr_assert_eq(tu_run_cli("info --help", &out, NULL), 0);
    cr_assert(strstr(out, "usage: woolly info"), "%s", out);
    free(out);
}

Test(gguf_info, missing_file)
{
    char *err = NULL;
    int rc = tu_run_cli("info /nonexistent/model.gguf", NULL, &err);
    cr_assert_neq(rc, 0);
    cr_assert(strstr(err, "/nonexistent/model.gguf") && strstr(err, "No such file"), "%s", err);
    free(err);
}

Test(gguf_info, not_a_gguf_file)
{
    char *err = NULL, args[4096];
    snprintf(args, sizeof args, "info '%s'", tu_data("vocab/ggml-vocab-gpt-2.gguf.inp"));
    int rc = tu_run_cli(args, NULL, &err);
    cr_assert_neq(rc, 0);
    cr_assert(strstr(err, "ggml-vocab-gpt-2.gguf.inp") && strstr(err, "not a GGUF file"), "%s", err);
    free(err);
}

Test(gguf_info, truncated_model)
{
    /* The first 1000000 bytes of stories260K: the header is whole, the tensor data is not. */
    size_t size = 0;
    char *buf = tu_read_file(tu_data("models/stories260K.gguf"), &size);
    const char *path = tu_tmp_path("truncated.gguf");
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(buf, 1, 1000000, f), 1000000);
    fclose(f);
    free(buf);
    char *err = NULL, args[4096];
    snprintf(args, sizeof args, "info '%s'", path);
    int rc = tu_run_cli(args, NULL, &err);
    cr_assert_neq(rc, 0);
    cr_assert(strstr(err, "runs past end of file (size 1000000)"), "%s", err);
    free(err);
    remove(path);
}

Test(gguf_info, usage_errors)
{
    char *err = NULL;
    cr_assert_eq(tu_run_cli("info", NULL, &err), 2);
    cr_assert(strstr(err, "MODEL.gguf is required (or --kernels)"), "%s", err);
    free(err);
    cr_assert_eq(tu_run_cli("info --bogus x.gguf", NULL, &err), 2);
    cr_assert(strstr(err, "unknown option '--bogus'"), "%s", err);
    free(err);
}
