/* Byte-level BPE (`tokenizer.ggml.model = gpt2`): the text is cut by the pre-tokenizer, each piece's
 * bytes become the vocabulary's one-character byte tokens, and adjacent tokens are merged, always the
 * pair with the lowest merge rank first (the leftmost among equals), until no listed merge applies.
 * A heap of candidate pairs keeps this O(n log n) in the length of a piece. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_heap.h"
#include "tokenizer_impl.h"
#include "unicode.h"

/* GPT-2's byte-to-character table maps the printable bytes (0x21..0x7E, 0xA1..0xAC, 0xAE..0xFF) to
 * themselves and the 68 others, in byte order, to U+0100.. : 0x00..0x20 -> +0..32, 0x7F..0xA0 ->
 * +33..66, 0xAD -> +67. */
uint32_t woolly_byte_to_char(unsigned char b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)
        return b;
    if (b <= 0x20)
        return 0x100u + b;
    if (b <= 0xA0)
        return 0x100u + 33 + (b - 0x7Fu);
    return 0x100u + 67; /* 0xAD */
}

int woolly_char_to_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 0x100 || cp > 0x100 + 67)
        return -1;
    uint32_t k = cp - 0x100;
    if (k <= 32)
        return (int)k;
    if (k <= 66)
        return (int)(0x7F + k - 33);
    return 0xAD;
}

static uint64_t pair_key(int32_t a, int32_t b)
{
    return ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
}

static uint64_t pair_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

/* The merge joining tokens a and b: its rank (and the merged token in *merged), or -1. */
static int32_t merge_find(const woolly_pair_map *m, int32_t a, int32_t b, int32_t *merged)
{
    if (!m->keys)
        return -1;
    uint64_t key = pair_key(a, b);
    for (uint64_t i = pair_hash(key) & m->mask;; i = (i + 1) & m->mask) {
        if (m->keys[i] == key) {
            *merged = m->merged[i];
            return m->rank[i];
        }
        if (m->keys[i] == 0)
            return -1;
    }
}

int woolly_bpe_init(woolly_tokenizer *t, const gguf_file *g, woolly_error *err)
{
    for (int b = 0; b < 256; b++) {
        char buf[4];
        size_t n = woolly_utf8_encode(woolly_byte_to_char((unsigned char)b), buf);
        t->byte_token[b] = woolly_vocab_lookup(t, buf, n);
    }

    const gguf_array *merges = NULL;
    woolly_error e2 = {{0}};
    if (!gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_STRING, &merges, &e2)) {
        if (e2.msg[0])
            return woolly_fail(err, "tokenizer: %s", e2.msg);
        return woolly_fail(err, "tokenizer: the gpt2 (BPE) vocabulary has no tokenizer.ggml.merges");
    }
    if (merges->n > (uint64_t)INT32_MAX)
        return woolly_fail(err, "tokenizer: %llu merges is too many", (unsigned long long)merges->n);

    uint64_t cap = 16;
    while (cap < merges->n * 2)
        cap *= 2;
    woolly_pair_map *m = &t->merges;
    m->keys = calloc(cap, sizeof *m->keys);
    m->rank = malloc(cap * sizeof *m->rank);
    m->merged = malloc(cap * sizeof *m->merged);
    if (!m->keys || !m->rank || !m->merged)
        return woolly_fail(err, "tokenizer: out of memory for %llu merges", (unsigned long long)merges->n);
    m->mask = cap - 1;

    /* A merge longer than the longest token cannot make a token. */
    size_t joined_cap = 1;
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->text_off[id + 1] - t->text_off[id] > joined_cap)
            joined_cap = (size_t)(t->text_off[id + 1] - t->text_off[id]);
    char *joined = malloc(joined_cap);
    if (!joined)
        return woolly_fail(err, "tokenizer: out of memory");
    for (uint64_t r = 0; r < merges->n; r++) {
        gguf_str s = merges->strs[r];
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) {
            free(joined);
            return woolly_fail(err, "tokenizer: merge %llu ('%.*s') is not two tokens separated by a space",
                               (unsigned long long)r, (int)(s.len > 100 ? 100 : s.len), s.ptr);
        }
        size_t la = (size_t)(sp - s.ptr), lb = s.len - la - 1;
        int32_t a = woolly_vocab_lookup(t, s.ptr, la), b = woolly_vocab_lookup(t, sp + 1, lb), ab = -1;
        if (la + lb <= joined_cap) {
            memcpy(joined, s.ptr, la);
            memcpy(joined + la, sp + 1, lb);
            ab = woolly_vocab_lookup(t, joined, la + lb);
        }
        if (a < 0 || b < 0 || ab < 0) {
            free(joined);
            return woolly_fail(err,
                               "tokenizer: merge %llu ('%.*s') names a token that is not in the vocabulary",
                               (unsigned long long)r, (int)(s.len > 100 ? 100 : s.len), s.ptr);
        }
        uint64_t key = pair_key(a, b);
        uint64_t i = pair_hash(key) & m->mask;
        while (m->keys[i] != 0 && m->keys[i] != key)
            i = (i + 1) & m->mask;
        if (m->keys[i] == 0) { /* a repeated pair keeps its first (lowest) rank */
            m->keys[i] = key;
            m->rank[i] = (int32_t)r;
            m->merged[i] = ab;
        }
    }
    free(joined);
    return 0;
}

/* ---- Encoding ---- */

typedef struct bpe_sym {
    int32_t id; /* -1 once merged into its left neighbour */
    int32_t prev, next;
} bpe_sym;

typedef struct bpe_work {
    bpe_sym *sym;
    size_t cap; /* symbols */
    woolly_merge_heap heap;
    char *text; /* a piece as the vocabulary spells it (for the whole-piece lookup) */
    size_t text_cap;
} bpe_work;

/* Queues the pair starting at symbol left if a merge joins it (key = rank: lowest first). */
static void try_pair(const woolly_tokenizer *t, bpe_work *w, int32_t left)
{
    if (left < 0)
        return;
    int32_t right = w->sym[left].next;
    if (right < 0)
        return;
    int32_t a = w->sym[left].id, b = w->sym[right].id, merged;
    if (a < 0 || b < 0)
        return;
    int32_t rank = merge_find(&t->merges, a, b, &merged);
    if (rank >= 0)
        woolly_merge_heap_push(&w->heap,
                               (woolly_merge_cand){rank, left, right, merged, (uint32_t)a, (uint32_t)b});
}

static int work_reserve(bpe_work *w, size_t n, woolly_error *err)
{
    if (n <= w->cap)
        return 0;
    size_t cap = w->cap ? w->cap : 64;
    while (cap < n)
        cap *= 2;
    bpe_sym *s = realloc(w->sym, cap * sizeof *s);
    if (!s)
        return woolly_fail(err, "tokenizer: out of memory for a piece of %zu bytes", n);
    w->sym = s;
    if (woolly_merge_heap_reserve(&w->heap, cap, err))
        return -1;
    w->cap = cap;
    return 0;
}

/* The token whose text is the piece's bytes mapped to characters (at most 2 bytes each), -1 if none,
 * -2 with a message if memory runs out. */
static int32_t whole_piece_token(const woolly_tokenizer *t, const unsigned char *p, size_t n, bpe_work *w,
                                 woolly_error *err)
{
    if (n * 2 > w->text_cap) {
        size_t cap = n * 2 + 64;
        char *s = realloc(w->text, cap);
        if (!s)
            return woolly_fail(err, "tokenizer: out of memory for a piece of %zu bytes", n) - 1;
        w->text = s;
        w->text_cap = cap;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += woolly_utf8_encode(woolly_byte_to_char(p[i]), w->text + m);
    return woolly_vocab_lookup(t, w->text, m);
}

static int bpe_piece(const woolly_tokenizer *t, const unsigned char *p, size_t n, bpe_work *w,
                     woolly_ids *out, woolly_error *err)
{
    if (n > INT32_MAX / 4)
        return woolly_fail(err, "tokenizer: a piece of %zu bytes is too long", n);
    if (work_reserve(w, n, err))
        return -1;
    if (t->bpe_whole_piece_first && n > 0) {
        int32_t whole = whole_piece_token(t, p, n, w, err);
        if (whole == -2)
            return -1;
        if (whole >= 0)
            return woolly_ids_push(out, whole, err);
    }
    /* A byte whose character the vocabulary lacks (StarCoder's has none for the bytes that never occur
     * in UTF-8) becomes the unknown token if there is a real one; otherwise it is left out before
     * merging, as the original tokenizers do (an "unknown" id that is really a control token such as
     * <|endoftext|> would end the text). */
    int32_t unk = t->unk >= 0 && t->type[t->unk] == WOOLLY_TOKEN_UNKNOWN ? t->unk : -1;
    bpe_sym *sym = w->sym;
    int32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_token[p[i]] >= 0 ? t->byte_token[p[i]] : unk;
        if (id < 0)
            continue;
        sym[m] = (bpe_sym){id, m - 1, -1};
        if (m > 0)
            sym[m - 1].next = m;
        m++;
    }
    if (m == 0)
        return 0;
    w->heap.n = 0;
    for (int32_t i = 0; i + 1 < m; i++)
        try_pair(t, w, i);
    while (w->heap.n > 0) {
        woolly_merge_cand c = woolly_merge_heap_pop(&w->heap);
        bpe_sym *l = &sym[c.left];
        if (l->id != (int32_t)c.left_tag || l->next < 0 || sym[l->next].id != (int32_t)c.right_tag)
            continue; /* stale: one side has changed since the pair was queued */
        int32_t r = l->next;
        l->id = c.merged;
        l->next = sym[r].next;
        if (l->next >= 0)
            sym[l->next].prev = c.left;
        sym[r].id = -1;
        try_pair(t, w, l->prev);
        try_pair(t, w, c.left);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next)
        if (woolly_ids_push(out, sym[i].id, err))
            return -1;
    return 0;
}

int woolly_bpe_encode(const woolly_tokenizer *t, const char *text, size_t len, woolly_ids *out,
                      woolly_error *err)
{
    uint32_t *bounds;
    int64_t n = woolly_pretok_split(t->pre, text, len, &bounds, err);
    if (n < 0)
        return -1;
    bpe_work w = {0};
    int rc = 0;
    for (int64_t i = 0; i < n && rc == 0; i++)
        rc = bpe_piece(t, (const unsigned char *)text + bounds[i], bounds[i + 1] - bounds[i], &w, out, err);
    free(w.sym);
    free(w.text);
    woolly_merge_heap_free(&w.heap);
    free(bounds);
    return rc;
}
