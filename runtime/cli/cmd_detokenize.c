/* woolly detokenize: the text of token ids. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "commands.h"
#include "tokenizer.h"

typedef struct id_list {
    int32_t *v;
    size_t n, cap;
} id_list;

/* Appends the ids of one argument; 0, or -1 after printing what is wrong. */
static int parse_ids(const char *s, id_list *ids)
{
    while (*s) {
        if (*s == ',' || *s == ' ' || *s == '\t' || *s == '\n') {
            s++;
            continue;
        }
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || (*end && *end != ',' && *end != ' ' && *end != '\t' && *end != '\n')) {
            size_t n = strcspn(s, ", \t\n");
            fprintf(stderr, "woolly detokenize: '%.*s' is not a token id\n", (int)n, s);
            return -1;
        }
        if (errno || v < INT32_MIN || v > INT32_MAX) {
            fprintf(stderr, "woolly detokenize: token id %.*s is out of range\n", (int)(end - s), s);
            return -1;
        }
        if (ids->n == ids->cap) {
            size_t cap = ids->cap ? ids->cap * 2 : 64;
            int32_t *nv = realloc(ids->v, cap * sizeof *nv);
            if (!nv) {
                fprintf(stderr, "woolly detokenize: out of memory\n");
                return -1;
            }
            ids->v = nv;
            ids->cap = cap;
        }
        ids->v[ids->n++] = (int32_t)v;
        s = end;
    }
    return 0;
}

int woolly_cmd_detokenize(int argc, char **argv)
{
    const char *model = NULL;
    cli_table ct = {
        .synopsis = "-m MODEL IDS...",
        .about =
            "Prints the text of the token ids IDS (separated by commas and/or spaces), exactly its bytes:\n"
            "no newline is added. A SentencePiece vocabulary's leading space is dropped again, as its\n"
            "decoder does.\n",
        .args = "IDS",
        .max_args = INT_MAX,
    };
    cli_add_required(
        &ct, (cli_flag){"-m", "--model", CLI_STR, &model, 0, 0, "MODEL",
                        "the GGUF file whose tokenizer to use (a model or a vocabulary-only file)", NULL});
    const int st = cli_parse(&ct, argc, argv);
    if (st != CLI_PROCEED)
        return st;
    id_list ids = {0};
    for (int i = 1; i <= ct.n_args; i++)
        if (parse_ids(argv[i], &ids)) {
            free(ids.v);
            return 2;
        }
    if (ids.n == 0) { /* no arguments, or only separators */
        fprintf(stderr, "woolly detokenize: no token ids given (see woolly detokenize --help)\n");
        return 2;
    }

    woolly_error err = {{0}};
    woolly_tokenizer *t = woolly_tokenizer_open_file(model, &err);
    if (!t) {
        fprintf(stderr, "woolly detokenize: %s\n", err.msg);
        free(ids.v);
        return 1;
    }
    int rc = 0;
    int64_t n = woolly_detokenize(t, ids.v, ids.n, NULL, 0, &err);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (n >= 0 && !text) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        n = -1;
    }
    if (n >= 0)
        n = woolly_detokenize(t, ids.v, ids.n, text, (size_t)n, &err);
    if (n < 0) {
        fprintf(stderr, "woolly detokenize: %s\n", err.msg);
        rc = 1;
    } else if (fwrite(text, 1, (size_t)n, stdout) != (size_t)n || fflush(stdout) != 0) {
        fprintf(stderr, "woolly detokenize: cannot write the text\n");
        rc = 1;
    }
    free(text);
    free(ids.v);
    woolly_tokenizer_close(t);
    return rc;
}
