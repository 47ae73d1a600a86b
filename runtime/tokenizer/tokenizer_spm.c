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

#include "tokenizer_heap.h"
#include "tokenizer_impl.h"
#include "unicode.h"

#define SPACE_MARK "\xE2\x96\x81"
#define SPACE_MARK_LEN 3

typedef struct spm_sym {
    uint32_t start, len; /* len 0 once merged into its left neighbour */
    int32_t prev, next;
} spm_sym;

typedef struct spm_work {
    const char *s; /* the escaped text */
    spm_sym *sym;
    size_t cap; /* symbols */
    woolly_merge_heap heap;
} spm_work;

static bool mergeable(const woolly_tokenizer *t, int32_t id)
{
    return id >= 0 && (t->type[id] == WOOLLY_TOKEN_NORMAL || t->type[id] == WOOLLY_TOKEN_USER_DEFINED);
}

/* Queues the pair starting at symbol left if it spells a mergeable piece (key = -score: highest first). */
static void try_pair(const woolly_tokenizer *t, spm_work *w, int32_t left)
{
    if (left < 0)
        return;
    int32_t right = w->sym[left].next;
    if (right < 0)
        return;
    const spm_sym *l = &w->sym[left], *r = &w->sym[right];
    int32_t id = woolly_vocab_lookup(t, w->s + l->start, l->len + r->len);
    if (mergeable(t, id))
        woolly_merge_heap_push(&w->heap,
                               (woolly_merge_cand){-(double)t->score[id], left, right, id, l->len, r->len});
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
        if (!s)
            return woolly_fail(err, "tokenizer: out of memory for a text of %zu bytes", max_syms);
        w->sym = s;
        if (woolly_merge_heap_reserve(&w->heap, cap, err))
            return -1;
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
    w->heap.n = 0;
    for (int32_t i = 0; i + 1 < n; i++)
        try_pair(t, w, i);
    while (w->heap.n > 0) {
        woolly_merge_cand c = woolly_merge_heap_pop(&w->heap);
        spm_sym *l = &w->sym[c.left], *r = &w->sym[c.right];
        /* Stale unless both sides are still as queued (a merged-away side has length 0). */
        if (l->next != c.right || l->len != c.left_tag || r->len != c.right_tag)
            continue;
        l->len += r->len;
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

    spm_work w = {s, NULL, 0, {0}};
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
    woolly_merge_heap_free(&w.heap);
    free(s);
    return rc;
}
