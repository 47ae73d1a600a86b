/* woolly tokenize: the token ids of a text, comma-separated on one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "commands.h"
#include "tokenizer.h"

int woolly_cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *file = NULL, *text = NULL;
    bool no_bos = false, special = false;
    cli_table ct = {
        .synopsis = "-m MODEL [--no-bos] [--special] (TEXT | --file FILE | -- TEXT)",
        .about =
            "Prints the token ids of TEXT (or of exactly the bytes of FILE), comma-separated on one line.\n"
            "MODEL may be a full model or a vocabulary-only GGUF file.\n",
        .args = "TEXT",
        .max_args = 1,
    };
    cli_add_required(&ct, (cli_flag){"-m", "--model", CLI_STR, &model, 0, 0, "MODEL",
                                     "the GGUF file whose tokenizer to use", NULL});
    cli_add(&ct, (cli_flag){NULL, "--no-bos", CLI_BOOL, &no_bos, 0, 0, NULL,
                            "do not prepend BOS (by default it is added when the vocabulary asks)", NULL});
    cli_add(&ct, (cli_flag){NULL, "--special", CLI_BOOL, &special, 0, 0, NULL,
                            "match special tokens (<s>, <|endoftext|>, ...) written in the text", NULL});
    cli_add(&ct, (cli_flag){"-f", "--file", CLI_STR, &file, 0, 0, "FILE", "read the text from FILE", NULL});
    const int st = cli_parse(&ct, argc, argv);
    if (st != CLI_PROCEED)
        return st;
    if (ct.n_args)
        text = argv[1];
    if ((text != NULL) == (file != NULL)) {
        fprintf(stderr, "woolly tokenize: give either TEXT or --file FILE (see woolly tokenize --help)\n");
        return 2;
    }

    size_t len = text ? strlen(text) : 0;
    char *buf = NULL;
    if (file) {
        if (!(buf = cli_read_file("tokenize", file, &len)))
            return 1;
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
