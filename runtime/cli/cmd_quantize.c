#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "commands.h"
#include "quantize.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: woolly quantize [-t N] [-q] IN.gguf OUT.gguf TYPE\n"
               "\n"
               "Converts a model's matrices; all metadata is kept, norms and other 1-D tensors stay F32.\n"
               "  TYPE        Q4_K_M (llama.cpp's mix: Q4_K, Q6_K for output, and attn_v/ffn_down of some\n"
               "              layers), Q6_K, Q8_0, F16 or F32\n"
               "  -t N        threads (default: the number of CPUs)\n"
               "  -q          no progress on stderr\n");
}

/* A whole decimal number in [lo, hi], or a message. */
static int parse_int(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    const long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "woolly quantize: %s '%s' must be a whole number in [%ld, %ld]\n", flag, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int woolly_cmd_quantize(int argc, char **argv)
{
    woolly_quantize_params p = {0};
    const char *pos[3];
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            long v;
            if (i + 1 >= argc) {
                fprintf(stderr, "woolly quantize: %s needs a value\n", a);
                return 2;
            }
            if (parse_int(a, argv[++i], 1, 256, &v) != 0)
                return 2;
            p.n_threads = (int)v;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            p.quiet = true;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "woolly quantize: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            fprintf(stderr, "woolly quantize: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (n_pos != 3) {
        fprintf(stderr, "woolly quantize: expected IN OUT TYPE, got %d argument%s\n", n_pos,
                n_pos == 1 ? "" : "s");
        usage(stderr);
        return 2;
    }
    const int f = woolly_ftype_from_name(pos[2]);
    if (f < 0) {
        fprintf(stderr, "woolly quantize: unknown type '%s' (expected Q4_K_M, Q6_K, Q8_0, F16 or F32)\n",
                pos[2]);
        return 2;
    }
    if (cli_output_is_input("quantize", pos[1], pos[0]))
        return 2;
    woolly_error err = {{0}};
    if (woolly_quantize_file(pos[0], pos[1], (enum woolly_ftype)f, &p, &err) != 0) {
        fprintf(stderr, "woolly quantize: %s\n", err.msg);
        return 1;
    }
    return 0;
}
