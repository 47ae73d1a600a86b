/* `woolly info MODEL`: what a GGUF file holds, read from its header only (the tensor data is never
 * touched, so this is instant on any model and works on vocabulary-only files). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "commands.h"
#include "gguf.h"
#include "info_kernels.h"

/* The `<arch>.` hyperparameters shown, in this order, when present. */
static const char *const HPARAMS[] = {
    "vocab_size",
    "context_length",
    "embedding_length",
    "feed_forward_length",
    "expert_count",
    "expert_used_count",
    "expert_feed_forward_length",
    "block_count",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.layer_norm_rms_epsilon",
    "attention.layer_norm_epsilon",
    "rope.dimension_count",
    "rope.freq_base",
    "embedding_scale",
    "residual_scale",
    "attention.scale",
    "logit_scale",
};

/* general.file_type: llama.cpp's names for what most of the tensors are. */
static const char *file_type_name(uint32_t ft)
{
    switch (ft) {
    case 0:
        return "ALL_F32";
    case 1:
        return "MOSTLY_F16";
    case 2:
        return "MOSTLY_Q4_0";
    case 3:
        return "MOSTLY_Q4_1";
    case 7:
        return "MOSTLY_Q8_0";
    case 8:
        return "MOSTLY_Q5_0";
    case 9:
        return "MOSTLY_Q5_1";
    case 10:
        return "MOSTLY_Q2_K";
    case 11:
        return "MOSTLY_Q3_K_S";
    case 12:
        return "MOSTLY_Q3_K_M";
    case 13:
        return "MOSTLY_Q3_K_L";
    case 14:
        return "MOSTLY_Q4_K_S";
    case 15:
        return "MOSTLY_Q4_K_M";
    case 16:
        return "MOSTLY_Q5_K_S";
    case 17:
        return "MOSTLY_Q5_K_M";
    case 18:
        return "MOSTLY_Q6_K";
    case 30:
        return "MOSTLY_IQ4_XS";
    case 25:
        return "MOSTLY_IQ4_NL";
    case 32:
        return "MOSTLY_BF16";
    default:
        return NULL;
    }
}

static void print_str(FILE *f, gguf_str s, uint64_t max)
{
    uint64_t n = s.len < max ? s.len : max;
    fputc('"', f);
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
    if (n < s.len)
        fprintf(f, "... (%" PRIu64 " bytes)", s.len);
}

static void print_scalar(FILE *f, const gguf_value *v)
{
    switch (v->type) {
    case GGUF_F32:
        fprintf(f, "%.7g", v->v.f64); /* enough digits for a float, no binary noise */
        break;
    case GGUF_F64:
        fprintf(f, "%.17g", v->v.f64);
        break;
    case GGUF_I8:
    case GGUF_I16:
    case GGUF_I32:
    case GGUF_I64:
        fprintf(f, "%" PRId64, v->v.i64);
        break;
    case GGUF_BOOL:
        fprintf(f, "%s", v->v.u64 ? "true" : "false");
        break;
    case GGUF_STRING:
        print_str(f, v->v.str, 120);
        break;
    default:
        fprintf(f, "%" PRIu64, v->v.u64);
    }
}

/* Arrays show their element type, length and first few elements. */
static void print_array(FILE *f, const gguf_array *a, int depth)
{
    enum { SHOWN = 4 };
    fprintf(f, "[%s x %" PRIu64 "]", gguf_vtype_name(a->type), a->n);
    if (a->n == 0 || depth > 2)
        return;
    fprintf(f, " {");
    for (uint64_t i = 0; i < a->n && i < SHOWN; i++) {
        if (i)
            fprintf(f, ", ");
        if (a->type == GGUF_STRING) {
            print_str(f, a->strs[i], 40);
        } else if (a->type == GGUF_ARRAY) {
            print_array(f, &a->items[i].v.arr, depth + 1);
        } else if (a->type == GGUF_F32 || a->type == GGUF_F64) {
            fprintf(f, "%.6g", gguf_arr_f64(a, i));
        } else if (a->type == GGUF_BOOL) {
            fprintf(f, "%s", gguf_arr_i64(a, i) ? "true" : "false");
        } else if (a->type == GGUF_U64) {
            fprintf(f, "%" PRIu64, (uint64_t)gguf_arr_i64(a, i));
        } else {
            fprintf(f, "%" PRId64, gguf_arr_i64(a, i));
        }
    }
    fprintf(f, "%s}", a->n > SHOWN ? ", ..." : "");
}

static void print_value(FILE *f, const gguf_value *v)
{
    if (v->type == GGUF_ARRAY)
        print_array(f, &v->v.arr, 0);
    else
        print_scalar(f, v);
}

static void print_kv_line(const gguf_file *g, const char *label, const char *key)
{
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv)
        return;
    printf("  %-34s ", label);
    print_value(stdout, &kv->value);
    printf("\n");
}

static uint64_t array_len(const gguf_file *g, const char *key)
{
    const gguf_kv *kv = gguf_find_kv(g, key);
    return kv && kv->value.type == GGUF_ARRAY ? kv->value.v.arr.n : 0;
}

static void print_tokenizer(const gguf_file *g)
{
    if (!gguf_find_kv(g, "tokenizer.ggml.model") && !gguf_find_kv(g, "tokenizer.ggml.tokens")) {
        printf("tokenizer: none\n");
        return;
    }
    printf("tokenizer:\n");
    print_kv_line(g, "model", "tokenizer.ggml.model");
    print_kv_line(g, "pre", "tokenizer.ggml.pre");
    printf("  %-34s %" PRIu64 "\n", "vocab size", array_len(g, "tokenizer.ggml.tokens"));
    if (gguf_find_kv(g, "tokenizer.ggml.merges"))
        printf("  %-34s %" PRIu64 "\n", "merges", array_len(g, "tokenizer.ggml.merges"));
    print_kv_line(g, "bos_token_id", "tokenizer.ggml.bos_token_id");
    print_kv_line(g, "eos_token_id", "tokenizer.ggml.eos_token_id");
    print_kv_line(g, "unknown_token_id", "tokenizer.ggml.unknown_token_id");
    print_kv_line(g, "padding_token_id", "tokenizer.ggml.padding_token_id");
    print_kv_line(g, "add_bos_token", "tokenizer.ggml.add_bos_token");
    print_kv_line(g, "add_eos_token", "tokenizer.ggml.add_eos_token");
    if (gguf_find_kv(g, "tokenizer.chat_template"))
        printf("  %-34s yes\n", "chat template");
}

static void print_tensors(const gguf_file *g)
{
    uint64_t type_count[WOOLLY_TYPE_COUNT] = {0}, type_elems[WOOLLY_TYPE_COUNT] = {0},
             type_bytes[WOOLLY_TYPE_COUNT] = {0};
    uint64_t elems = 0, bytes = 0;
    size_t name_w = 4;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        size_t n = strlen(g->tensors[i].name);
        name_w = n > name_w ? n : name_w;
    }
    if (name_w > 60)
        name_w = 60;
    printf("tensors: %" PRIu64 "\n", g->n_tensors);
    if (g->n_tensors == 0)
        return;
    printf("  %-*s %-5s %-24s %12s\n", (int)name_w, "name", "type", "shape", "bytes");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        char shape[96];
        int k = snprintf(shape, sizeof shape, "[");
        for (uint32_t d = 0; d < t->n_dims; d++)
            k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%" PRIu64, d ? ", " : "", t->ne[d]);
        snprintf(shape + k, sizeof shape - (size_t)k, "]");
        printf("  %-*s %-5s %-24s %12" PRIu64 "\n", (int)name_w, t->name, woolly_type_get(t->type)->name,
               shape, t->nbytes);
        uint64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        type_count[t->type]++;
        type_elems[t->type] += n;
        type_bytes[t->type] += t->nbytes;
        elems += n;
        bytes += t->nbytes;
    }
    printf("by type:\n");
    for (int ty = 0; ty < WOOLLY_TYPE_COUNT; ty++)
        if (type_count[ty])
            printf("  %-5s %4" PRIu64 " tensors %14" PRIu64 " weights %14" PRIu64
                   " bytes %7.3f bits/weight\n",
                   woolly_type_get((uint32_t)ty)->name, type_count[ty], type_elems[ty], type_bytes[ty],
                   8.0 * (double)type_bytes[ty] / (double)type_elems[ty]);
    printf("total: %" PRIu64 " tensors, %" PRIu64 " weights, %" PRIu64
           " bytes (%.2f MiB), %.3f bits per weight\n",
           g->n_tensors, elems, bytes, (double)bytes / (1024.0 * 1024.0),
           8.0 * (double)bytes / (double)elems);
}

static void print_all_kv(const gguf_file *g)
{
    printf("metadata: %" PRIu64 " keys\n", g->n_kv);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        printf("  %.*s (%s) = ", (int)kv->key.len, kv->key.ptr, gguf_vtype_name(kv->value.type));
        print_value(stdout, &kv->value);
        printf("\n");
    }
}

int woolly_cmd_info(int argc, char **argv)
{
    bool all_kv = false, kernels = false;
    cli_table t = {
        .synopsis = "[--kv] MODEL.gguf | --kernels",
        .about = "Shows a GGUF file's architecture, hyperparameters, tokenizer, tensor table (name, type,\n"
                 "shape, bytes) and totals with bits per weight. Works on vocabulary-only files.\n"
                 "With --kernels (no model): the kernel registry and what this CPU selects.\n",
        .args = "MODEL.gguf",
        .min_args = 0,
        .max_args = 1,
    };
    cli_add(&t, (cli_flag){NULL, "--kv", CLI_BOOL, &all_kv, 0, 0, NULL,
                           "also list every metadata key with its type and value", NULL});
    cli_add(&t, (cli_flag){NULL, "--kernels", CLI_BOOL, &kernels, 0, 0, NULL,
                           "list the kernel registry: ISA, tile, layout, required CPU features, and what this CPU "
                           "selects",
                           NULL});
    const int st = cli_parse(&t, argc, argv);
    if (st != CLI_PROCEED)
        return st;
    if (kernels) {
        if (t.n_args > 0) {
            fprintf(stderr, "woolly info: --kernels takes no model\n");
            return 2;
        }
        return woolly_info_kernels();
    }
    if (t.n_args < 1) {
        fprintf(stderr, "woolly info: MODEL.gguf is required (or --kernels)\n");
        return 2;
    }
    const char *path = argv[1];

    woolly_error err = {{0}};
    gguf_file *g = gguf_open(path, &err);
    if (!g) {
        fprintf(stderr, "woolly info: %s\n", err.msg);
        return 1;
    }
    printf("file: %s\n", path);
    printf("  %-34s %zu bytes\n", "size", g->size);
    printf("  %-34s %" PRIu32 "\n", "GGUF version", g->version);
    printf("  %-34s %" PRIu64 "\n", "alignment", g->alignment);
    printf("  %-34s %" PRIu64 "\n", "metadata keys", g->n_kv);
    print_kv_line(g, "name", "general.name");
    uint32_t ft = 0;
    if (gguf_get_u32(g, "general.file_type", &ft, &err))
        printf("  %-34s %" PRIu32 " (%s)\n", "file_type", ft,
               file_type_name(ft) ? file_type_name(ft) : "unknown");

    gguf_str arch = {0};
    bool have_arch = gguf_get_str(g, "general.architecture", &arch, &err);
    if (have_arch) {
        printf("architecture: %.*s\nhyperparameters:\n", (int)arch.len, arch.ptr);
        for (size_t i = 0; i < sizeof HPARAMS / sizeof HPARAMS[0]; i++) {
            char key[256];
            snprintf(key, sizeof key, "%.*s.%s", (int)(arch.len < 128 ? arch.len : 128), arch.ptr,
                     HPARAMS[i]);
            print_kv_line(g, HPARAMS[i], key);
        }
    } else {
        printf("architecture: %s\n", err.msg[0] ? err.msg : "(none: no general.architecture key)");
    }
    print_tokenizer(g);
    if (all_kv)
        print_all_kv(g);
    print_tensors(g);
    gguf_close(g);
    return 0;
}
