/* SentencePiece-style tokenization (`tokenizer.ggml.model = llama`): spaces become the marker U+2581
 * ("▁", with one prepended to the text), the text starts as one symbol per character, and adjacent
 * symbols whose concatenation is a vocabulary piece are merged, always the pair whose piece has the
 * highest score first (the leftmost among equals). What remains is a piece, or a character that the
 * vocabulary lacks: that one is spelled with byte tokens <0xXX>, or the unknown token.
 *
 * Speed: the merges of one stretch of text cannot reach across a point where no piece could span it.
 * In SentencePiece vocabularies no piece has a space marker after another character, so the text is
 * cut before every marker that follows a non-marker, which keeps each heap tiny; the result is exactly
 * the same as merging the whole text at once, since no candidate pair ever crosses such a cut. A
 * vocabulary that has such pieces is merged in one stretch (still O(n log n)). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"
#include "unicode.h"

#define SPACE_MARK "\xE2\x96\x81"
#define SPACE_MARK_LEN 3

typedef struct spm_sym {
    uint32_t start, len; /* len 0 once merged into its left neighbour */
    int32_t prev, next;
} spm_sym;

typedef struct spm_cand {
    float score;
    int32_t left, right;
    uint32_t len; /* of the merged piece: a queued pair is stale unless its sides still add up */
    int32_t id;
} spm_cand;

typedef struct spm_work {
    const char *s; /* the escaped text */
    spm_sym *sym;
    spm_cand *heap;
    size_t cap, n_heap;
} spm_work;

static bool mergeable(const woolly_tokenizer *t, int32_t id)
{
    return id >= 0 && (t->type[id] == WOOLLY_TOKEN_NORMAL || t->type[id] == WOOLLY_TOKEN_USER_DEFINED);
}

static bool cand_before(const spm_cand *x, const spm_cand *y)
{
    return x->score > y->score || (x->score == y->score && x->left < y->left);
}

static void heap_push(spm_work *w, spm_cand c)
{
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!cand_before(&c, &w->heap[parent]))
            break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = c;
}

static spm_cand heap_pop(spm_work *w)
{
    spm_cand top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && cand_before(&w->heap[c + 1], &w->heap[c]))
            c++;
        if (!cand_before(&w->heap[c], &last))
            break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0)
        w->heap[i] = last;
    return top;
}

static void try_pair(const woolly_tokenizer *t, spm_work *w, int32_t left)
{
    if (left < 0)
        return;
    int32_t right = w->sym[left].next;
    if (right < 0)
        return;
    const spm_sym *l = &w->sym[left], *r = &w->sym[right];
    uint32_t len = l->len + r->len;
    int32_t id = woolly_vocab_lookup(t, w->s + l->start, len);
    if (mergeable(t, id))
        heap_push(w, (spm_cand){t->score[id], left, right, len, id});
}

static int emit_symbol(const woolly_tokenizer *t, const char *p, size_t n, woolly_ids *out, woolly_error *err)
{
    int32_t id = woolly_vocab_lookup(t, p, n);
    if (mergeable(t, id))
        return woolly_ids_push(out, id, err);
    bool bytes = true;
    for (size_t i = 0; i < n; i++)
        bytes = bytes && t->byte_token[(unsigned char)p[i]] >= 0;
    if (bytes) {
        for (size_t i = 0; i < n; i++)
            if (woolly_ids_push(out, t->byte_token[(unsigned char)p[i]], err))
                return -1;
        return 0;
    }
    if (t->unk < 0)
        return woolly_fail(err,
                           "tokenizer: character '%.*s' is not in the vocabulary, which has neither byte "
                           "tokens for it nor an unknown token",
                           (int)n, p);
    return woolly_ids_push(out, t->unk, err);
}

/* Merges and emits the symbols of s[b..e). */
static int spm_stretch(const woolly_tokenizer *t, spm_work *w, uint32_t b, uint32_t e, woolly_ids *out,
                       woolly_error *err)
{
    size_t max_syms = e - b;
    if (max_syms > w->cap) {
        size_t cap = w->cap ? w->cap : 64;
        while (cap < max_syms)
            cap *= 2;
        spm_sym *s = realloc(w->sym, cap * sizeof *s);
        if (s)
            w->sym = s;
        spm_cand *h = realloc(w->heap, 3 * cap * sizeof *h);
        if (h)
            w->heap = h;
        if (!s || !h)
            return woolly_fail(err, "tokenizer: out of memory for a text of %zu bytes", max_syms);
        w->cap = cap;
    }
    int32_t n = 0;
    for (uint32_t i = b; i < e;) {
        size_t k;
        woolly_utf8_decode(w->s + i, e - i, &k);
        w->sym[n] = (spm_sym){i, (uint32_t)k, n - 1, -1};
        if (n > 0)
            w->sym[n - 1].next = n;
        n++;
        i += (uint32_t)k;
    }
    w->n_heap = 0;
    for (int32_t i = 0; i + 1 < n; i++)
        try_pair(t, w, i);
    while (w->n_heap > 0) {
        spm_cand c = heap_pop(w);
        spm_sym *l = &w->sym[c.left], *r = &w->sym[c.right];
        if (l->len == 0 || r->len == 0 || l->next != c.right || l->len + r->len != c.len)
            continue;
        l->len = c.len;
        l->next = r->next;
        if (l->next >= 0)
            w->sym[l->next].prev = c.left;
        r->len = 0;
        try_pair(t, w, l->prev);
        try_pair(t, w, c.left);
    }
    for (int32_t i = 0; n > 0 && i >= 0; i = w->sym[i].next)
        if (emit_symbol(t, w->s + w->sym[i].start, w->sym[i].len, out, err))
            return -1;
    return 0;
}

static bool is_mark(const char *s, size_t i, size_t n)
{
    return i + SPACE_MARK_LEN <= n && memcmp(s + i, SPACE_MARK, SPACE_MARK_LEN) == 0;
}

int woolly_spm_encode(const woolly_tokenizer *t, const char *text, size_t len, bool add_space_prefix,
                      woolly_ids *out, woolly_error *err)
{
    if (len > (UINT32_MAX - SPACE_MARK_LEN) / SPACE_MARK_LEN)
        return woolly_fail(err, "tokenizer: a text of %zu bytes is too long", len);
    char *s = malloc(len * SPACE_MARK_LEN + SPACE_MARK_LEN + 1);
    if (!s)
        return woolly_fail(err, "tokenizer: out of memory for a text of %zu bytes", len);
    size_t n = 0;
    if (add_space_prefix) {
        memcpy(s, SPACE_MARK, SPACE_MARK_LEN);
        n = SPACE_MARK_LEN;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(s + n, SPACE_MARK, SPACE_MARK_LEN);
            n += SPACE_MARK_LEN;
        } else {
            s[n++] = text[i];
        }
    }

    spm_work w = {s, NULL, NULL, 0, 0};
    int rc = 0;
    if (!t->spm_cut_at_space) {
        rc = spm_stretch(t, &w, 0, (uint32_t)n, out, err);
    } else {
        /* Cut before a marker that follows a non-marker character. */
        size_t b = 0, i = 0;
        bool prev_mark = false;
        while (i < n && rc == 0) {
            if (is_mark(s, i, n)) {
                if (!prev_mark && i > b) {
                    rc = spm_stretch(t, &w, (uint32_t)b, (uint32_t)i, out, err);
                    b = i;
                }
                prev_mark = true;
                i += SPACE_MARK_LEN;
            } else {
                size_t k;
                woolly_utf8_decode(s + i, n - i, &k);
                prev_mark = false;
                i += k;
            }
        }
        if (rc == 0 && n > b)
            rc = spm_stretch(t, &w, (uint32_t)b, (uint32_t)n, out, err);
    }
    free(w.sym);
    free(w.heap);
    free(s);
    return rc;
}
