#include "logprobs.h"

#include <math.h>
#include <stdlib.h>

#include "text.h"

/* Whether a ranks above b: larger logit, the lower id on ties (a deterministic order). */
static int above(float la, woolly_token a, float lb, woolly_token b)
{
    return la > lb || (la == lb && a < b);
}

void srv_logprobs_compute(const float *logits, int32_t n_vocab, woolly_token tok, int k, srv_token_lp *out)
{
    if (k > SRV_MAX_TOP_LOGPROBS)
        k = SRV_MAX_TOP_LOGPROBS;
    if (k > n_vocab)
        k = n_vocab;
    /* The k best so far, best first; a logit that does not beat the k-th is rejected by one compare,
     * which is what almost every logit of a large vocabulary does. */
    float best[SRV_MAX_TOP_LOGPROBS];
    woolly_token ids[SRV_MAX_TOP_LOGPROBS];
    int n = 0;
    float mx = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++) {
        const float l = logits[i];
        if (l > mx)
            mx = l;
        if (k == 0 || (n == k && !above(l, i, best[k - 1], ids[k - 1])))
            continue;
        int at = n < k ? n++ : k - 1;
        while (at > 0 && above(l, i, best[at - 1], ids[at - 1])) {
            best[at] = best[at - 1];
            ids[at] = ids[at - 1];
            at--;
        }
        best[at] = l;
        ids[at] = i;
    }
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++)
        sum += exp((double)logits[i] - (double)mx);
    const double lse = (double)mx + log(sum);
    out->id = tok;
    out->logprob = (float)((double)logits[tok] - lse);
    out->n_top = n;
    for (int i = 0; i < n; i++)
        out->top[i] = (srv_alt){ids[i], (float)((double)best[i] - lse)};
}

/* A token's bytes (space marker and byte tokens decoded; control tokens have none), in buf when they
 * fit, else in a heap copy that *heap owns. */
static const char *token_bytes(const woolly_tokenizer *t, woolly_token id, char *buf, size_t cap, size_t *n,
                               char **heap)
{
    *heap = NULL;
    const int64_t len = woolly_token_bytes(t, id, buf, cap);
    *n = len < 0 ? 0 : (size_t)len;
    if (*n <= cap)
        return buf;
    if (!(*heap = malloc(*n))) {
        *n = cap;
        return buf;
    }
    woolly_token_bytes(t, id, *heap, *n);
    return *heap;
}

/* The token's text as a JSON string (bytes that are not UTF-8 replaced by U+FFFD: a token may be part of
 * a character; "bytes" keeps them exact). */
static json_t *token_text(const char *bytes, size_t n)
{
    srv_buf b = {0};
    json_t *v = srv_buf_append_utf8(&b, bytes, n) ? NULL : json_stringn(b.p ? b.p : "", b.len);
    srv_buf_free(&b);
    return v ? v : json_string("");
}

static json_t *bytes_array(const char *bytes, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer((unsigned char)bytes[i]));
    return a;
}

/* A logprob as JSON: -inf (a token the model rules out entirely) is not JSON; the API's clients get a
 * very large negative number instead, as OpenAI sends -9999.0 for such tokens. */
static json_t *logprob_value(float lp)
{
    return json_real(isfinite(lp) ? (double)lp : -9999.0);
}

static json_t *alt_object(const woolly_tokenizer *t, woolly_token id, float lp)
{
    char buf[256], *heap;
    size_t n;
    const char *b = token_bytes(t, id, buf, sizeof buf, &n, &heap);
    json_t *o = json_pack("{s:o, s:o, s:o}", "token", token_text(b, n), "logprob", logprob_value(lp), "bytes",
                          bytes_array(b, n));
    free(heap);
    return o;
}

json_t *srv_logprobs_chat_entry(const woolly_tokenizer *t, const srv_token_lp *lp)
{
    json_t *e = alt_object(t, lp->id, lp->logprob);
    json_t *top = json_array();
    for (int32_t i = 0; i < lp->n_top; i++)
        json_array_append_new(top, alt_object(t, lp->top[i].id, lp->top[i].logprob));
    json_object_set_new(e, "top_logprobs", top);
    return e;
}

json_t *srv_logprobs_chat(const woolly_tokenizer *t, const srv_token_lp *lps, int32_t n)
{
    json_t *content = json_array();
    for (int32_t i = 0; i < n; i++)
        json_array_append_new(content, srv_logprobs_chat_entry(t, &lps[i]));
    return json_pack("{s:o, s:n}", "content", content, "refusal");
}

json_t *srv_logprobs_legacy(const woolly_tokenizer *t, const srv_token_lp *lps, int32_t n, size_t *offset)
{
    json_t *tokens = json_array(), *lp = json_array(), *top = json_array(), *off = json_array();
    char buf[256], *heap;
    for (int32_t i = 0; i < n; i++) {
        size_t len;
        const char *b = token_bytes(t, lps[i].id, buf, sizeof buf, &len, &heap);
        json_array_append_new(tokens, token_text(b, len));
        free(heap);
        json_array_append_new(lp, logprob_value(lps[i].logprob));
        json_array_append_new(off, json_integer((json_int_t)*offset));
        *offset += len;
        json_t *alts = json_object();
        for (int32_t k = 0; k < lps[i].n_top; k++) {
            size_t m;
            const char *tb = token_bytes(t, lps[i].top[k].id, buf, sizeof buf, &m, &heap);
            json_t *key = token_text(tb, m);
            free(heap);
            /* Two tokens of the same text keep the more likely (the first: they come best first). */
            if (!json_object_get(alts, json_string_value(key)))
                json_object_set_new(alts, json_string_value(key), logprob_value(lps[i].top[k].logprob));
            json_decref(key);
        }
        json_array_append_new(top, alts);
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lp, "top_logprobs", top,
                     "text_offset", off);
}
