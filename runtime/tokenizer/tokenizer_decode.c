/* Decoding: ids back to bytes. Each token's bytes are resolved once at load (tokenizer.c); here they
 * are joined, with SentencePiece's rule that the space the encoder prepended is dropped again, and,
 * when streaming, without ever cutting a UTF-8 character in two. */
#include <string.h>

#include "tokenizer_impl.h"
#include "unicode.h"

static const char *token_dec(const woolly_tokenizer *t, int32_t id, size_t *n)
{
    *n = (size_t)(t->dec_off[id + 1] - t->dec_off[id]);
    return t->dec + t->dec_off[id];
}

int64_t woolly_token_bytes(const woolly_tokenizer *t, int32_t id, char *buf, size_t cap)
{
    if (id < 0 || id >= t->n_vocab)
        return -1;
    size_t n;
    const char *s = token_dec(t, id, &n);
    if (buf && cap)
        memcpy(buf, s, n < cap ? n : cap);
    return (int64_t)n;
}

/* A token's bytes after the leading-space rule: the first token that has any bytes loses one leading
 * space when the vocabulary prepends one on encoding. */
static const char *token_out(const woolly_tokenizer *t, int32_t id, bool *first, size_t *n)
{
    const char *s = token_dec(t, id, n);
    if (*first && *n > 0) {
        *first = false;
        if (t->add_space_prefix && s[0] == ' ') {
            s++;
            (*n)--;
        }
    }
    return s;
}

int64_t woolly_detokenize(const woolly_tokenizer *t, const int32_t *ids, size_t n, char *out, size_t cap,
                          woolly_error *err)
{
    bool first = true;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return woolly_fail(
                err,
                "tokenizer: token id %d (at position %zu) is out of range: the vocabulary has %d "
                "tokens (0..%d)",
                ids[i], i, t->n_vocab, t->n_vocab - 1);
        size_t m;
        const char *s = token_out(t, ids[i], &first, &m);
        if (out && total < cap)
            memcpy(out + total, s, m < cap - total ? m : cap - total);
        total += m;
    }
    return (int64_t)total;
}

void woolly_detok_stream_init(woolly_detok_stream *s, const woolly_tokenizer *t)
{
    s->tok = t;
    s->first = true;
    s->n_pending = 0;
}

/* How many bytes at the end of b[0..n) are the start of a UTF-8 character still missing bytes. */
static size_t incomplete_tail(const char *b, size_t n)
{
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)b[n - back];
        if ((c & 0xC0) == 0x80)
            continue; /* a continuation byte: look further back for its lead */
        size_t need = woolly_utf8_lead_len(c);
        return need > back ? back : 0;
    }
    return 0;
}

int64_t woolly_detok_stream_feed(woolly_detok_stream *s, int32_t id, char *out, size_t cap)
{
    const woolly_tokenizer *t = s->tok;
    if (id < 0 || id >= t->n_vocab)
        return -1;
    size_t m;
    const char *p = token_out(t, id, &s->first, &m);
    size_t n = s->n_pending + m;
    if (n > cap)
        return -1;
    memcpy(out, s->pending, s->n_pending);
    memcpy(out + s->n_pending, p, m);
    size_t keep = incomplete_tail(out, n);
    memcpy(s->pending, out + n - keep, keep);
    s->n_pending = keep;
    return (int64_t)(n - keep);
}

int64_t woolly_detok_stream_flush(woolly_detok_stream *s, char *out, size_t cap)
{
    size_t n = s->n_pending;
    if (n > cap)
        return -1;
    memcpy(out, s->pending, n);
    s->n_pending = 0;
    return (int64_t)n;
}
