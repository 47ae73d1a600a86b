#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "commands.h"
#include "synth.h"

int woolly_cmd_synth(int argc, char **argv)
{
    woolly_error err = {{0}};
    woolly_synth_config c = {0};
    const char *preset = "tiny", *out = NULL, *arch = NULL, *type = NULL;
    int n_presets = 0, n_vocab_given = 0;
    char preset_help[512];
    snprintf(preset_help, sizeof preset_help, "%s (default tiny)", woolly_synth_preset_names());
    cli_table t = {
        .synopsis = "[--preset P] [shape flags] [--vocab FILE] [--type T] [--seed S]\n"
                    "                    [--chat-template NAME] [-t N] [-q] -o OUT.gguf",
        .about =
            "Writes a random-weight model (weights N(0, 0.02), norms 1 + N(0, 0.1)); the same arguments\n"
            "and seed always give the same file. The shape flags override the preset.\n"
            "Mixtures of experts: granitemoe-3b is Granite 3.0 3B-A800M's shape; qwen3moe-30b-a3b-12l is\n"
            "Qwen3-30B-A3B's shape with 12 of its 48 layers (about 5 GB: the whole model in Q4_K_M, about\n"
            "17.5 GB, would not leave room beside everything else on a 24 GiB machine).\n",
    };
    cli_add_required(
        &t, (cli_flag){"-o", "--output", CLI_STR, &out, 0, 0, "OUT.gguf", "the file to write", NULL});
    cli_add(&t, (cli_flag){NULL, "--preset", CLI_STR, &preset, 0, 0, "P", preset_help, &n_presets});
    cli_add(&t, (cli_flag){NULL, "--type", CLI_ENUM, &type, 0, 0, "Q4_K_M|Q6_K|Q8_0|F16|BF16|F32",
                           "matrix type (default Q4_K_M)", NULL});
    cli_add(&t, (cli_flag){NULL, "--seed", CLI_U64, &c.seed, 0, 0, "S", "random seed (default 0)", NULL});
    cli_add(&t, (cli_flag){NULL, "--vocab", CLI_STR, &c.vocab_path, 0, 0, "FILE",
                           "copy the tokenizer.* keys of a GGUF file (default: a built-in byte-level BPE)",
                           NULL});
    cli_add(&t, (cli_flag){NULL, "--chat-template", CLI_STR, &c.chat_template, 0, 0, "NAME",
                           "granite, llama2, llama3, chatml or phi3 (default: none; phi3 for --arch phi3)", NULL});
    cli_add(&t, (cli_flag){"-t", "--threads", CLI_INT, &c.n_threads, 1, 256, "N",
                           "threads (default: the number of CPUs; the file does not depend on it)", NULL});
    cli_add(&t, (cli_flag){"-q", "--quiet", CLI_BOOL, &c.quiet, 0, 0, NULL, "no progress on stderr", NULL});
    cli_add(&t, (cli_flag){NULL, "--arch", CLI_ENUM, &arch, 0, 0, woolly_synth_arch_names(), "architecture", NULL});
    cli_add(&t, (cli_flag){NULL, "--n-embd", CLI_I64, &c.n_embd, 0, 0, "N", "embedding width", NULL});
    cli_add(&t, (cli_flag){NULL, "--n-ff", CLI_I64, &c.n_ff, 0, 0, "N", "feed-forward width", NULL});
    cli_add(&t, (cli_flag){NULL, "--n-expert", CLI_I64, &c.n_expert, 0, 0, "N",
                           "experts in each layer's FFN (0: a dense FFN; llama with experts is Mixtral)", NULL});
    cli_add(&t, (cli_flag){NULL, "--n-expert-used", CLI_I64, &c.n_expert_used, 0, 0, "K",
                           "experts each token is routed to", NULL});
    cli_add(&t, (cli_flag){NULL, "--n-ff-exp", CLI_I64, &c.n_ff_exp, 0, 0, "N",
                           "qwen3moe: an expert's feed-forward width (default n_ff)", NULL});
    cli_add(&t, (cli_flag){NULL, "--n-layer", CLI_I64, &c.n_layer, 0, 0, "N", "layers", NULL});
    cli_add(&t, (cli_flag){NULL, "--n-head", CLI_I64, &c.n_head, 0, 0, "N", "attention heads", NULL});
    cli_add(&t, (cli_flag){NULL, "--n-head-kv", CLI_I64, &c.n_head_kv, 0, 0, "N", "key/value heads", NULL});
    cli_add(&t, (cli_flag){NULL, "--head-dim", CLI_I64, &c.head_dim, 0, 0, "N",
                           "query/key head size (default n_embd / n_head)", NULL});
    cli_add(&t, (cli_flag){NULL, "--sliding-window", CLI_I64, &c.n_swa, 0, 0, "N",
                           "sliding-window attention of N positions (0: none)", NULL});
    cli_add(&t, (cli_flag){NULL, "--swa-pattern", CLI_I64, &c.swa_pattern, 0, 0, "P",
                           "gemma3: every P-th layer is global, the others slide", NULL});
    cli_add(&t, (cli_flag){NULL, "--n-ctx", CLI_I64, &c.n_ctx, 0, 0, "N", "trained context length", NULL});
    cli_add(&t, (cli_flag){NULL, "--n-vocab", CLI_I64, &c.n_vocab, 0, 0, "N",
                           "vocabulary size (default: the preset's, or the --vocab file's)", &n_vocab_given});
    cli_add(&t, (cli_flag){NULL, "--rope-base", CLI_FLOAT, &c.rope_base, 0, 0, "X", "RoPE base", NULL});
    cli_add(&t, (cli_flag){NULL, "--norm-eps", CLI_FLOAT, &c.norm_eps, 0, 0, "X", "RMS norm epsilon", NULL});
    cli_add(&t, (cli_flag){NULL, "--embedding-scale", CLI_FLOAT, &c.embedding_scale, 0, 0, "X",
                           "granite: embedding scale", NULL});
    cli_add(&t, (cli_flag){NULL, "--residual-scale", CLI_FLOAT, &c.residual_scale, 0, 0, "X",
                           "granite: residual scale", NULL});
    cli_add(&t, (cli_flag){NULL, "--attention-scale", CLI_FLOAT, &c.attention_scale, 0, 0, "X",
                           "granite: attention scale", NULL});
    cli_add(&t, (cli_flag){NULL, "--logit-scale", CLI_FLOAT, &c.logit_scale, 0, 0, "X",
                           "granite: logit scale", NULL});
    cli_add(&t, (cli_flag){NULL, "--tied", CLI_BOOL, &c.tied_embd, 0, 0, NULL,
                           "the token embedding doubles as the output matrix", NULL});
    cli_add(&t, (cli_flag){NULL, "--untied", CLI_BOOL_OFF, &c.tied_embd, 0, 0, NULL,
                           "a separate output matrix", NULL});

    /* The preset is the base every other flag overrides, wherever it stands: the first parse finds it
     * (and checks everything), the second, after loading it, applies the overrides. */
    int st = cli_parse(&t, argc, argv);
    if (st != CLI_PROCEED)
        return st;
    if (n_presets > 1) {
        fprintf(stderr, "woolly synth: --preset given more than once\n");
        return 2;
    }
    if (woolly_synth_preset(preset, &c, &err) != 0) {
        fprintf(stderr, "woolly synth: %s\n", err.msg);
        return 2;
    }
    st = cli_parse(&t, argc, argv);
    if (st != CLI_PROCEED)
        return st;
    if (arch)
        snprintf(c.arch, sizeof c.arch, "%s", arch);
    if (type)
        c.ftype = (enum woolly_ftype)woolly_ftype_from_name(type);
    if (!n_vocab_given && c.vocab_path)
        c.n_vocab = 0; /* the vocab file decides */
    if (cli_output_is_input("synth", out, c.vocab_path))
        return 2;
    if (woolly_synth_validate(&c, &err) != 0) {
        fprintf(stderr, "woolly synth: %s\n", err.msg);
        return 2;
    }
    if (woolly_synth_write(&c, out, &err) != 0) {
        fprintf(stderr, "woolly synth: %s\n", err.msg);
        return 1;
    }
    return 0;
}
