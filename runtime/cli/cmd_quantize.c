#include <stdio.h>

#include "cli_common.h"
#include "commands.h"
#include "quantize.h"

int woolly_cmd_quantize(int argc, char **argv)
{
    woolly_quantize_params p = {0};
    cli_table t = {
        .synopsis = "[-t N] [-q] [--imatrix FILE [--act-scales]] IN.gguf OUT.gguf TYPE",
        .about =
            "Converts a model's matrices; all metadata is kept, norms and other 1-D tensors stay F32.\n"
            "TYPE is Q4_K_M (llama.cpp's mix: Q4_K, Q6_K for output, and attn_v/ffn_down of some\n"
            "layers), Q6_K, Q8_0, F16, BF16 or F32; or one of llama.cpp's mixes Q2_K, Q3_K_S, Q3_K_M,\n"
            "Q3_K_L, Q5_K_M, IQ4_XS, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL (their own type, more bits for\n"
            "output, attn_v, ffn_down and attn_output as llama.cpp chooses).\n"
            "--imatrix weighs each matrix's rounding errors by an importance matrix (llama.cpp's imatrix\n"
            "GGUF, from `woolly imatrix` or llama-imatrix), as llama-quantize --imatrix does.\n"
            "--act-scales (with --imatrix) also scales the columns of the matrices a norm feeds\n"
            "(attention's q, k, v; the FFN's gate and up) by a power of their inputs' mean square,\n"
            "searched per layer for the least output error, and divides the norm by the same scales:\n"
            "the model computes the same function, and its important columns round more finely (dense\n"
            "llama, granite, qwen2, qwen3, gemma3 and phi3 models).\n",
        .args = "IN.gguf OUT.gguf TYPE",
        .min_args = 3,
        .max_args = 3,
    };
    cli_add(&t, (cli_flag){"-t", "--threads", CLI_INT, &p.n_threads, 1, 256, "N",
                           "threads (default: the number of CPUs)", NULL});
    cli_add(&t, (cli_flag){NULL, "--imatrix", CLI_STR, &p.imatrix, 0, 0, "FILE",
                           "importance matrix weighing the rounding errors", NULL});
    cli_add(&t, (cli_flag){NULL, "--act-scales", CLI_BOOL, &p.act_scales, 0, 0, NULL,
                           "activation-aware column scales folded into the norms (needs --imatrix)", NULL});
    cli_add(&t, (cli_flag){NULL, "--act-scales-alpha", CLI_FLOAT, &p.act_scales_alpha, 0.01, 1, "A",
                           "one alpha for every layer instead of the search (for tests)", NULL});
    cli_add(&t, (cli_flag){"-q", "--quiet", CLI_BOOL, &p.quiet, 0, 0, NULL, "no progress on stderr", NULL});
    const int st = cli_parse(&t, argc, argv);
    if (st != CLI_PROCEED)
        return st;
    p.act_scales |= p.act_scales_alpha > 0;
    const char *in = argv[1], *out = argv[2], *type = argv[3];
    const int f = woolly_ftype_from_name(type);
    if (f < 0) {
        fprintf(stderr,
                "woolly quantize: unknown type '%s' (expected Q4_K_M, Q6_K, Q8_0, F16, BF16, F32, Q2_K, Q3_K_S, "
                "Q3_K_M, Q3_K_L, Q5_K_M, IQ4_XS, Q4_0, Q4_1, Q5_0, Q5_1 or IQ4_NL)\n",
                type);
        return 2;
    }
    if (cli_output_is_input("quantize", out, in))
        return 2;
    woolly_error err = {{0}};
    if (woolly_quantize_file(in, out, (enum woolly_ftype)f, &p, &err) != 0) {
        fprintf(stderr, "woolly quantize: %s\n", err.msg);
        return 1;
    }
    return 0;
}
