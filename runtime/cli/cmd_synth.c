#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "commands.h"
#include "synth.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: woolly synth [--preset P] [shape flags] [--vocab FILE] [--type T] [--seed S]\n"
            "                    [--chat-template NAME] [-t N] [-q] -o OUT.gguf\n"
            "\n"
            "Writes a random-weight model (weights N(0, 0.02), norms 1 + N(0, 0.1)); the same arguments\n"
            "and seed always give the same file.\n"
            "  --preset P            %s (default tiny)\n"
            "  --type T              Q4_K_M (default), Q6_K, Q8_0, F16 or F32\n"
            "  --seed S              random seed, 0 to 2^64-1 (default 0)\n"
            "  --vocab FILE          copy the tokenizer (all tokenizer.* keys) from a GGUF file; without\n"
            "                        it, a built-in byte-level BPE learned from a built-in English text\n"
            "  --chat-template NAME  granite, llama2, llama3 or chatml\n"
            "  -t N                  threads (default: the number of CPUs; the file does not depend on it)\n"
            "  -q                    no progress on stderr\n"
            "shape flags (override the preset):\n"
            "  --arch llama|granite  --n-embd N  --n-ff N  --n-layer N  --n-head N  --n-head-kv N\n"
            "  --n-ctx N  --n-vocab N  --rope-base X  --norm-eps X  --tied | --untied (output matrix)\n"
            "  granite: --embedding-scale X  --residual-scale X  --attention-scale X  --logit-scale X\n",
            woolly_synth_preset_names());
}

static int fail(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "woolly synth: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n");
    return 2;
}

static int parse_i64(const char *flag, const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0)
        return fail("%s '%s' is not a whole number", flag, s);
    *out = v;
    return 0;
}

static int parse_f32(const char *flag, const char *s, float *out)
{
    char *end;
    errno = 0;
    const float v = strtof(s, &end);
    if (*s == '\0' || *end != '\0' || errno != 0 || !isfinite(v))
        return fail("%s '%s' is not a finite number", flag, s);
    *out = v;
    return 0;
}

static int parse_seed(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || s[0] == '-')
        return fail("--seed '%s' must be a whole number in [0, 2^64-1]%s", s, "");
    *out = v;
    return 0;
}

enum flag_kind { I64, F32, STR, ARCH, TYPE, SEED, THREADS };

typedef struct {
    const char *name;
    enum flag_kind kind;
    void *dst;
} flag;

/* Parses the value of flag f into its destination; non-zero (after a message) if it is not valid. */
static int parse_flag(const flag *f, const char *v)
{
    switch (f->kind) {
    case I64:
        return parse_i64(f->name, v, f->dst);
    case F32:
        return parse_f32(f->name, v, f->dst);
    case STR:
        *(const char **)f->dst = v;
        return 0;
    case SEED:
        return parse_seed(v, f->dst);
    case ARCH:
        if (strcmp(v, "llama") != 0 && strcmp(v, "granite") != 0)
            return fail("unknown architecture '%s'%s (expected llama or granite)", v, "");
        snprintf(f->dst, 16, "%s", v);
        return 0;
    case TYPE: {
        const int t = woolly_ftype_from_name(v);
        if (t < 0)
            return fail("unknown type '%s'%s (expected Q4_K_M, Q6_K, Q8_0, F16 or F32)", v, "");
        *(enum woolly_ftype *)f->dst = (enum woolly_ftype)t;
        return 0;
    }
    case THREADS: {
        int64_t n;
        if (parse_i64(f->name, v, &n) != 0)
            return 2;
        if (n < 1 || n > 256)
            return fail("%s '%s' must be in [1, 256]", f->name, v);
        *(int *)f->dst = (int)n;
        return 0;
    }
    }
    return 2;
}

int woolly_cmd_synth(int argc, char **argv)
{
    woolly_error err = {{0}};
    woolly_synth_config c;
    const char *preset = "tiny", *out = NULL, *preset_again = NULL;
    int n_presets = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) {
            preset = argv[++i];
            n_presets++;
        }
    }
    if (n_presets > 1)
        return fail("--preset given more than once%s%s", "", "");
    if (woolly_synth_preset(preset, &c, &err) != 0) {
        fprintf(stderr, "woolly synth: %s\n", err.msg);
        return 2;
    }

    int64_t n_vocab = INT64_MIN; /* not given */
    const flag FLAGS[] = {
        {"--preset", STR, &preset_again},
        {"-o", STR, &out},
        {"--output", STR, &out},
        {"--arch", ARCH, c.arch},
        {"--n-embd", I64, &c.n_embd},
        {"--n-ff", I64, &c.n_ff},
        {"--n-layer", I64, &c.n_layer},
        {"--n-head", I64, &c.n_head},
        {"--n-head-kv", I64, &c.n_head_kv},
        {"--n-ctx", I64, &c.n_ctx},
        {"--n-vocab", I64, &n_vocab},
        {"--rope-base", F32, &c.rope_base},
        {"--norm-eps", F32, &c.norm_eps},
        {"--embedding-scale", F32, &c.embedding_scale},
        {"--residual-scale", F32, &c.residual_scale},
        {"--attention-scale", F32, &c.attention_scale},
        {"--logit-scale", F32, &c.logit_scale},
        {"--vocab", STR, &c.vocab_path},
        {"--chat-template", STR, &c.chat_template},
        {"--type", TYPE, &c.ftype},
        {"--seed", SEED, &c.seed},
        {"-t", THREADS, &c.n_threads},
        {"--threads", THREADS, &c.n_threads},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--tied")) {
            c.tied_embd = true;
            continue;
        }
        if (!strcmp(a, "--untied")) {
            c.tied_embd = false;
            continue;
        }
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            c.quiet = true;
            continue;
        }
        const flag *f = NULL;
        for (size_t j = 0; j < sizeof FLAGS / sizeof FLAGS[0] && !f; j++)
            if (!strcmp(a, FLAGS[j].name))
                f = &FLAGS[j];
        if (!f) {
            fprintf(stderr, "woolly synth: unknown %s '%s'\n", a[0] == '-' ? "option" : "argument", a);
            usage(stderr);
            return 2;
        }
        if (i + 1 >= argc)
            return fail("%s needs a value%s", a, "");
        const int st = parse_flag(f, argv[++i]);
        if (st)
            return st;
    }
    if (!out)
        return fail("no output file: give -o OUT.gguf%s%s", "", "");
    if (n_vocab != INT64_MIN)
        c.n_vocab = n_vocab;
    else if (c.vocab_path)
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
