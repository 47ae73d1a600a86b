/* woolly tokenize: the token ids of a text, comma-separated on one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "tokenizer.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: woolly tokenize -m MODEL [--no-bos] [--special] (TEXT | --file FILE | -- TEXT)\n\n"
            "Prints the token ids of TEXT (or of exactly the bytes of FILE), comma-separated on one line.\n"
            "MODEL may be a full model or a vocabulary-only GGUF file.\n\n"
            "  -m, --model MODEL  the GGUF file whose tokenizer to use\n"
            "  --no-bos           do not prepend BOS (by default it is added when the vocabulary asks)\n"
            "  --special          match special tokens (<s>, <|endoftext|>, ...) written in the text\n"
            "  -f, --file FILE    read the text from FILE\n"
            "  --                 what follows is the TEXT, even if it starts with '-'\n");
}

/* The whole file, exactly its bytes. */
static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *nb = realloc(buf, cap * 2);
        if (!nb)
            free(buf);
        buf = nb;
        cap *= 2;
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = n;
    return buf;
}

int woolly_cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *file = NULL, *text = NULL;
    bool no_bos = false, special = false, options_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!options_done && !strcmp(a, "--")) {
            options_done = true; /* a TEXT that starts with '-' follows */
        } else if (options_done) {
            if (text) {
                fprintf(stderr, "woolly tokenize: more than one TEXT argument ('%s'); quote the text\n", a);
                return 2;
            }
            text = a;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "woolly tokenize: %s needs a value\n", a);
                return 2;
            }
            bool is_model = !strcmp(a, "-m") || !strcmp(a, "--model");
            *(is_model ? &model : &file) = argv[++i];
        } else if (!strcmp(a, "--no-bos")) {
            no_bos = true;
        } else if (!strcmp(a, "--special")) {
            special = true;
        } else if (a[0] == '-' && a[1] != 0) {
            fprintf(stderr, "woolly tokenize: unknown option '%s'\n\n", a);
            usage(stderr);
            return 2;
        } else if (text) {
            fprintf(stderr, "woolly tokenize: more than one TEXT argument ('%s'); quote the text\n", a);
            return 2;
        } else {
            text = a;
        }
    }
    if (!model) {
        fprintf(stderr, "woolly tokenize: no model (-m MODEL)\n\n");
        usage(stderr);
        return 2;
    }
    if ((text != NULL) == (file != NULL)) {
        fprintf(stderr, "woolly tokenize: give either TEXT or --file FILE\n\n");
        usage(stderr);
        return 2;
    }

    size_t len = text ? strlen(text) : 0;
    char *buf = NULL;
    if (file) {
        buf = read_all(file, &len);
        if (!buf) {
            fprintf(stderr, "woolly tokenize: cannot read '%s'\n", file);
            return 1;
        }
        text = buf;
    }
    woolly_error err = {{0}};
    woolly_tokenizer *t = woolly_tokenizer_open_file(model, &err);
    if (!t) {
        fprintf(stderr, "woolly tokenize: %s\n", err.msg);
        free(buf);
        return 1;
    }
    woolly_tokenize_opts opts = {woolly_tokenizer_adds_bos(t) && !no_bos, woolly_tokenizer_adds_eos(t),
                                 special};
    int64_t n = woolly_tokenize(t, text, len, &opts, NULL, 0, &err);
    int32_t *ids = n > 0 ? malloc((size_t)n * sizeof *ids) : NULL;
    if (n > 0 && (!ids || woolly_tokenize(t, text, len, &opts, ids, n, &err) != n))
        n = -1;
    int rc = 0;
    if (n < 0) {
        fprintf(stderr, "woolly tokenize: %s\n", err.msg[0] ? err.msg : "out of memory");
        rc = 1;
    } else {
        for (int64_t i = 0; i < n; i++)
            printf(i ? ",%d" : "%d", ids[i]);
        printf("\n");
    }
    free(ids);
    free(buf);
    woolly_tokenizer_close(t);
    return rc;
}
