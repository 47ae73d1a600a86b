/* What a grammar needs from a model: the trie of its token texts (built once per model, on first use,
 * since most runs never constrain), and the public grammar calls with their errors left for
 * woolly_last_error. */
#include <pthread.h>
#include <stdlib.h>

#include "context.h"
#include "grammar.h"
#include "model.h"
#include "sampler.h"

static pthread_mutex_t trie_lock = PTHREAD_MUTEX_INITIALIZER;

woolly_vocab_trie *woolly_tokenizer_trie(const woolly_tokenizer *t, woolly_error *err)
{
    const int32_t n = woolly_tokenizer_n_vocab(t);
    const size_t max = woolly_tokenizer_max_token_bytes(t);
    char **texts = calloc((size_t)n, sizeof *texts);
    uint32_t *lens = calloc((size_t)n, sizeof *lens);
    char *buf = malloc(max + 1);
    woolly_vocab_trie *trie = NULL;
    if (!texts || !lens || !buf) {
        woolly_fail(err, "grammar: out of memory for the texts of %d tokens", (int)n);
        goto done;
    }
    for (int32_t i = 0; i < n; i++) {
        int64_t k = woolly_token_bytes(t, i, buf, max + 1);
        if (k < 0 || (size_t)k > max) {
            woolly_fail(err, "grammar: token %d has no text", (int)i);
            goto done;
        }
        if (!(texts[i] = malloc((size_t)k + 1))) {
            woolly_fail(err, "grammar: out of memory for the texts of %d tokens", (int)n);
            goto done;
        }
        for (int64_t j = 0; j < k; j++)
            texts[i][j] = buf[j];
        lens[i] = (uint32_t)k;
    }
    trie = woolly_vocab_trie_build(n, (const char *const *)texts, lens, err);
done:
    if (texts)
        for (int32_t i = 0; i < n; i++)
            free(texts[i]);
    free(texts);
    free(lens);
    free(buf);
    return trie;
}

const woolly_vocab_trie *woolly_model_vocab_trie(const woolly_model *m, woolly_error *err)
{
    if (!m->tok) {
        woolly_fail(err, "grammar: the model has no usable vocabulary (%s)", m->tok_err.msg);
        return NULL;
    }
    pthread_mutex_lock(&trie_lock);
    woolly_model *mm = (woolly_model *)m; /* a cache filled once; the model is otherwise read-only */
    if (!mm->vocab_trie)
        mm->vocab_trie = woolly_tokenizer_trie(m->tok, err);
    woolly_vocab_trie *t = mm->vocab_trie;
    pthread_mutex_unlock(&trie_lock);
    return t;
}

woolly_grammar *woolly_grammar_open_gbnf(const char *text, size_t len)
{
    woolly_error err = {{0}};
    woolly_grammar *g = woolly_grammar_from_gbnf(text, len, &err);
    if (!g)
        woolly_set_last_error(&err);
    return g;
}

woolly_grammar *woolly_grammar_open_json_schema(const char *json, size_t len)
{
    woolly_error err = {{0}};
    woolly_grammar *g = woolly_grammar_from_json_schema(json, len, &err);
    if (!g)
        woolly_set_last_error(&err);
    return g;
}

void woolly_grammar_close(woolly_grammar *g)
{
    woolly_grammar_free(g);
}
