/* The vocabulary trie: token texts sorted bytewise give the trie's nodes in depth-first order directly,
 * each node created when a text leaves the previous text's path. */
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"

typedef struct text_ref {
    const char *const *texts;
    const uint32_t *lens;
} text_ref;

static text_ref sort_ref; /* qsort has no context argument in C11; the build is serialized below */

static int cmp_token(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const uint32_t lx = sort_ref.lens[x], ly = sort_ref.lens[y];
    int c = memcmp(sort_ref.texts[x], sort_ref.texts[y], lx < ly ? lx : ly);
    if (c)
        return c;
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

#include <pthread.h>
static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;

woolly_vocab_trie *woolly_vocab_trie_build(int32_t n_vocab, const char *const *texts, const uint32_t *lens,
                                           woolly_error *err)
{
    if (n_vocab < 1) {
        woolly_fail(err, "vocabulary trie: vocabulary size %d must be >= 1", (int)n_vocab);
        return NULL;
    }
    woolly_vocab_trie *t = calloc(1, sizeof *t);
    int32_t *order = malloc(sizeof *order * (size_t)n_vocab);
    uint32_t *node_of = malloc(sizeof *node_of * (size_t)n_vocab);
    uint32_t *path = NULL;
    size_t total = 1;
    int32_t n_tok = 0;
    uint32_t max_len = 0;
    if (!t || !order || !node_of)
        goto oom;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (lens[i] > UINT16_MAX) {
            woolly_fail(err, "vocabulary trie: token %d is %u bytes long (at most %u)", (int)i, lens[i],
                        (unsigned)UINT16_MAX);
            goto fail;
        }
        if (lens[i] > 0) {
            order[n_tok++] = i;
            total += lens[i];
            if (lens[i] > max_len)
                max_len = lens[i];
        }
    }
    pthread_mutex_lock(&sort_lock);
    sort_ref = (text_ref){texts, lens};
    qsort(order, (size_t)n_tok, sizeof *order, cmp_token);
    pthread_mutex_unlock(&sort_lock);

    t->n_vocab = n_vocab;
    t->max_depth = max_len;
    t->byte = malloc(total);
    t->depth = malloc(total * sizeof *t->depth);
    t->skip = malloc(total * sizeof *t->skip);
    t->tok_off = calloc(total + 1, sizeof *t->tok_off);
    t->toks = malloc(sizeof *t->toks * (size_t)(n_tok ? n_tok : 1));
    path = malloc(sizeof *path * (max_len + 1));
    if (!t->byte || !t->depth || !t->skip || !t->tok_off || !t->toks || !path)
        goto oom;
    uint32_t n = 1, prev_len = 0;
    const char *prev = "";
    t->byte[0] = 0;
    t->depth[0] = 0;
    path[0] = 0;
    for (int32_t k = 0; k < n_tok; k++) {
        const int32_t id = order[k];
        const char *s = texts[id];
        const uint32_t len = lens[id];
        uint32_t lcp = 0;
        while (lcp < len && lcp < prev_len && s[lcp] == prev[lcp])
            lcp++;
        for (uint32_t d = prev_len; d > lcp; d--) /* the previous text's nodes below lcp are complete */
            t->skip[path[d]] = n;
        for (uint32_t d = lcp + 1; d <= len; d++) {
            t->byte[n] = (uint8_t)s[d - 1];
            t->depth[n] = (uint16_t)d;
            path[d] = n++;
        }
        node_of[id] = path[len];
        t->tok_off[path[len] + 1]++;
        prev = s;
        prev_len = len;
    }
    for (uint32_t d = prev_len; d > 0; d--)
        t->skip[path[d]] = n;
    t->skip[0] = n;
    t->n_nodes = n;
    for (uint32_t i = 0; i < n; i++)
        t->tok_off[i + 1] += t->tok_off[i];
    for (int32_t k = 0; k < n_tok; k++) { /* in sorted order: a node's tokens are in ascending id order */
        const int32_t id = order[k];
        t->toks[t->tok_off[node_of[id]]++] = id;
    }
    for (uint32_t i = n; i > 0; i--) /* the fill moved each start to the next node's start */
        t->tok_off[i] = t->tok_off[i - 1];
    t->tok_off[0] = 0;
    free(order);
    free(node_of);
    free(path);
    return t;
oom:
    woolly_fail(err, "vocabulary trie: out of memory for %d tokens", (int)n_vocab);
fail:
    free(order);
    free(node_of);
    free(path);
    woolly_vocab_trie_free(t);
    return NULL;
}

void woolly_vocab_trie_free(woolly_vocab_trie *t)
{
    if (!t)
        return;
    free(t->byte);
    free(t->depth);
    free(t->skip);
    free(t->tok_off);
    free(t->toks);
    free(t);
}

int32_t woolly_vocab_trie_n_vocab(const woolly_vocab_trie *t)
{
    return t->n_vocab;
}

uint32_t woolly_vocab_trie_n_nodes(const woolly_vocab_trie *t)
{
    return t->n_nodes;
}
