/* The tokenizer: loading the vocabulary from GGUF metadata, the special tokens, and the encoding
 * entry point (the algorithms are in tokenizer_spm.c and tokenizer_bpe.c, decoding in
 * tokenizer_decode.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"
#include "unicode.h"

#define SPACE_MARK "\xE2\x96\x81"

/* ---- Special tokens ---- */

static int trie_add(woolly_special_trie *tr, const char *s, size_t n, int32_t id, int32_t *cap,
                    woolly_error *err)
{
    int32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int32_t ch = tr->nodes[node].first_child;
        while (ch >= 0 && tr->nodes[ch].byte != c)
            ch = tr->nodes[ch].next_sibling;
        if (ch < 0) {
            if (tr->n_nodes == *cap) {
                int32_t nc = *cap * 2;
                struct woolly_trie_node *nn = realloc(tr->nodes, (size_t)nc * sizeof *nn);
                if (!nn)
                    return woolly_fail(err, "tokenizer: out of memory for the special tokens");
                tr->nodes = nn;
                *cap = nc;
            }
            ch = tr->n_nodes++;
            tr->nodes[ch] = (struct woolly_trie_node){-1, tr->nodes[node].first_child, -1, c};
            tr->nodes[node].first_child = ch;
        }
        node = ch;
    }
    if (tr->nodes[node].token < 0) /* the first of repeated strings wins */
        tr->nodes[node].token = id;
    tr->first_byte[(unsigned char)s[0]] = true;
    return 0;
}

static int build_trie(woolly_tokenizer *t, woolly_special_trie *tr, bool with_control, woolly_error *err)
{
    int32_t cap = 64;
    tr->nodes = malloc((size_t)cap * sizeof *tr->nodes);
    if (!tr->nodes)
        return woolly_fail(err, "tokenizer: out of memory for the special tokens");
    tr->nodes[0] = (struct woolly_trie_node){-1, -1, -1, 0};
    tr->n_nodes = 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        uint8_t ty = t->type[id];
        bool special = ty == WOOLLY_TOKEN_USER_DEFINED ||
                       (with_control && (ty == WOOLLY_TOKEN_CONTROL || ty == WOOLLY_TOKEN_UNKNOWN));
        size_t n;
        const char *s = woolly_token_text(t, id, &n);
        if (special && n > 0 && trie_add(tr, s, n, id, &cap, err))
            return -1;
    }
    return 0;
}

/* The longest special token at text[i..len): its length (and id), or 0. */
static size_t trie_match(const woolly_special_trie *tr, const char *text, size_t i, size_t len, int32_t *id)
{
    size_t best = 0;
    int32_t node = 0;
    for (size_t k = i; k < len; k++) {
        unsigned char c = (unsigned char)text[k];
        int32_t ch = tr->nodes[node].first_child;
        while (ch >= 0 && tr->nodes[ch].byte != c)
            ch = tr->nodes[ch].next_sibling;
        if (ch < 0)
            break;
        node = ch;
        if (tr->nodes[node].token >= 0) {
            best = k + 1 - i;
            *id = tr->nodes[node].token;
        }
    }
    return best;
}

/* ---- Loading ---- */

static int get_id(const gguf_file *g, const char *key, int32_t n_vocab, int32_t *out, woolly_error *err)
{
    woolly_error e2 = {{0}};
    uint32_t v;
    if (gguf_get_u32(g, key, &v, &e2)) {
        *out = v < (uint32_t)n_vocab ? (int32_t)v : -1; /* e.g. 0xFFFFFFFF: "none" */
        return 0;
    }
    if (e2.msg[0]) {
        /* A negative id (an i32 -1) also means none. */
        const gguf_kv *kv = gguf_find_kv(g, key);
        if (kv &&
            (kv->value.type == GGUF_I32 || kv->value.type == GGUF_I64 || kv->value.type == GGUF_I8 ||
             kv->value.type == GGUF_I16) &&
            kv->value.v.i64 < 0) {
            *out = -1;
            return 0;
        }
        return woolly_fail(err, "tokenizer: %s", e2.msg);
    }
    return 0; /* absent: keep the default */
}

static int get_flag(const gguf_file *g, const char *key, bool *out, woolly_error *err)
{
    woolly_error e2 = {{0}};
    if (!gguf_get_bool(g, key, out, &e2) && e2.msg[0])
        return woolly_fail(err, "tokenizer: %s", e2.msg);
    return 0;
}

/* A numeric array of exactly n elements under key, or NULL if absent (error if malformed). */
static int get_num_arr(const gguf_file *g, const char *key, uint64_t n, const gguf_array **out,
                       woolly_error *err)
{
    *out = NULL;
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv)
        return 0;
    if (kv->value.type != GGUF_ARRAY)
        return woolly_fail(err, "tokenizer: %s has type %s, expected an array", key,
                           gguf_vtype_name(kv->value.type));
    const gguf_array *a = &kv->value.v.arr;
    if (a->type == GGUF_STRING || a->type == GGUF_ARRAY || a->type == GGUF_BOOL)
        return woolly_fail(err, "tokenizer: %s is an array of %s, expected numbers", key,
                           gguf_vtype_name(a->type));
    if (a->n != n)
        return woolly_fail(err, "tokenizer: %s has %llu entries but the vocabulary has %llu tokens", key,
                           (unsigned long long)a->n, (unsigned long long)n);
    *out = a;
    return 0;
}

static int copy_tokens(woolly_tokenizer *t, const gguf_array *toks, woolly_error *err)
{
    uint64_t total = 0;
    for (uint64_t i = 0; i < toks->n; i++)
        total += toks->strs[i].len + 1;
    t->text = malloc(total ? total : 1);
    t->text_off = malloc((toks->n + 1) * sizeof *t->text_off);
    t->dec = malloc(total ? total : 1);
    t->dec_off = malloc((toks->n + 1) * sizeof *t->dec_off);
    t->type = malloc(toks->n);
    if (!t->text || !t->text_off || !t->dec || !t->dec_off || !t->type)
        return woolly_fail(err, "tokenizer: out of memory for %llu tokens", (unsigned long long)toks->n);
    uint64_t off = 0;
    for (uint64_t i = 0; i < toks->n; i++) {
        t->text_off[i] = off;
        if (toks->strs[i].len)
            memcpy(t->text + off, toks->strs[i].ptr, toks->strs[i].len);
        off += toks->strs[i].len;
        t->text[off++] = 0;
    }
    t->text_off[toks->n] = off;
    return 0;
}

/* The <0xXX> value of a byte token's text, or -1. */
static int byte_token_value(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* What each token stands for as text (never longer than its stored string). */
static void build_decoded(woolly_tokenizer *t)
{
    uint64_t off = 0;
    size_t max_len = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        size_t n;
        const char *s = woolly_token_text(t, id, &n);
        char *o = t->dec + off;
        size_t m = 0;
        uint8_t ty = t->type[id];
        int bv = ty == WOOLLY_TOKEN_BYTE ? byte_token_value(s, n) : -1;
        if (ty == WOOLLY_TOKEN_CONTROL || ty == WOOLLY_TOKEN_UNUSED) {
            m = 0; /* markup and padding stand for no text */
        } else if (bv >= 0) {
            o[m++] = (char)bv;
        } else if (ty == WOOLLY_TOKEN_UNKNOWN ||
                   (t->model == WOOLLY_TOK_BPE && ty == WOOLLY_TOKEN_USER_DEFINED)) {
            memcpy(o, s, n);
            m = n;
        } else if (t->model == WOOLLY_TOK_SPM) {
            for (size_t i = 0; i < n;) {
                if (i + 3 <= n && memcmp(s + i, SPACE_MARK, 3) == 0) {
                    o[m++] = ' ';
                    i += 3;
                } else {
                    o[m++] = s[i++];
                }
            }
        } else { /* byte-level: each character stands for one byte */
            for (size_t i = 0; i < n;) {
                size_t k;
                uint32_t cp = woolly_utf8_decode(s + i, n - i, &k);
                int b = woolly_char_to_byte(cp);
                if (b >= 0) {
                    o[m++] = (char)b;
                } else {
                    memcpy(o + m, s + i, k);
                    m += k;
                }
                i += k;
            }
        }
        t->dec_off[id] = off;
        off += m;
        if (m > max_len)
            max_len = m;
    }
    t->dec_off[t->n_vocab] = off;
    t->max_dec_len = max_len;
}

static bool spm_can_cut_at_space(const woolly_tokenizer *t)
{
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (t->type[id] != WOOLLY_TOKEN_NORMAL && t->type[id] != WOOLLY_TOKEN_USER_DEFINED)
            continue;
        size_t n;
        const char *s = woolly_token_text(t, id, &n);
        bool prev_other = false;
        for (size_t i = 0; i < n;) {
            bool mark = i + 3 <= n && memcmp(s + i, SPACE_MARK, 3) == 0;
            if (mark && prev_other)
                return false;
            size_t k = 3;
            if (!mark)
                woolly_utf8_decode(s + i, n - i, &k);
            prev_other = !mark;
            i += k;
        }
    }
    return true;
}

/* llama.cpp marks the special tokens of a model whose general.name says Phi-3 ("phi-3" or "phi3", any
 * case) as stripping the whitespace to their right, except <unk>, <s> and <|endoftext|>. */
static int phi3_rstrip(woolly_tokenizer *t, const gguf_file *g, woolly_error *err)
{
    woolly_error e2 = {{0}};
    gguf_str name;
    if (!gguf_get_str(g, "general.name", &name, &e2))
        return 0;
    char low[256];
    size_t n = name.len < sizeof low - 1 ? name.len : sizeof low - 1;
    for (size_t i = 0; i < n; i++)
        low[i] = (char)(name.ptr[i] >= 'A' && name.ptr[i] <= 'Z' ? name.ptr[i] + 32 : name.ptr[i]);
    low[n] = 0;
    if (!strstr(low, "phi-3") && !strstr(low, "phi3"))
        return 0;
    t->rstrip = calloc((size_t)t->n_vocab, sizeof *t->rstrip);
    if (!t->rstrip)
        return woolly_fail(err, "tokenizer: out of memory");
    for (int32_t id = 0; id < t->n_vocab; id++) {
        uint8_t ty = t->type[id];
        const char *s = t->text + t->text_off[id];
        bool special =
            ty == WOOLLY_TOKEN_CONTROL || ty == WOOLLY_TOKEN_USER_DEFINED || ty == WOOLLY_TOKEN_UNKNOWN;
        t->rstrip[id] = (special || !strcmp(s, "</s>")) && strcmp(s, "<unk>") && strcmp(s, "<s>") &&
                        strcmp(s, "<|endoftext|>");
    }
    return 0;
}

static int load(woolly_tokenizer *t, const gguf_file *g, woolly_error *err)
{
    woolly_error e2 = {{0}};
    gguf_str model;
    if (!gguf_get_str(g, "tokenizer.ggml.model", &model, &e2))
        return woolly_fail(err, "tokenizer: %s",
                           e2.msg[0] ? e2.msg
                                     : "the file has no tokenizer "
                                       "(no tokenizer.ggml.model key)");
    if (gguf_str_eq(model, "llama"))
        t->model = WOOLLY_TOK_SPM;
    else if (gguf_str_eq(model, "gpt2"))
        t->model = WOOLLY_TOK_BPE;
    else
        return woolly_fail(err,
                           "tokenizer: tokenizer.ggml.model '%.*s' is not supported (supported: llama, gpt2)",
                           (int)(model.len > 64 ? 64 : model.len), model.ptr);

    t->pre = WOOLLY_PRETOK_GPT2;
    if (t->model == WOOLLY_TOK_BPE) {
        gguf_str pre;
        if (gguf_get_str(g, "tokenizer.ggml.pre", &pre, &e2)) {
            if (woolly_pretok_lookup(pre.ptr, pre.len, &t->pre))
                return woolly_fail(
                    err, "tokenizer: unknown pre-tokenizer '%.*s' (tokenizer.ggml.pre); supported: %s",
                    (int)(pre.len > 64 ? 64 : pre.len), pre.ptr, woolly_pretok_supported());
        } else if (e2.msg[0]) {
            return woolly_fail(err, "tokenizer: %s", e2.msg);
        }
    }

    const gguf_array *toks;
    if (!gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_STRING, &toks, &e2))
        return woolly_fail(err, "tokenizer: %s", e2.msg[0] ? e2.msg : "no tokenizer.ggml.tokens");
    if (toks->n == 0 || toks->n > (uint64_t)INT32_MAX / 2)
        return woolly_fail(err, "tokenizer: tokenizer.ggml.tokens has %llu entries",
                           (unsigned long long)toks->n);
    t->n_vocab = (int32_t)toks->n;
    if (copy_tokens(t, toks, err))
        return -1;

    const gguf_array *types, *scores;
    if (get_num_arr(g, "tokenizer.ggml.token_type", toks->n, &types, err) ||
        get_num_arr(g, "tokenizer.ggml.scores", toks->n, &scores, err))
        return -1;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int64_t ty = types ? gguf_arr_i64(types, (uint64_t)i) : WOOLLY_TOKEN_NORMAL;
        t->type[i] = ty >= WOOLLY_TOKEN_NORMAL && ty <= WOOLLY_TOKEN_BYTE ? (uint8_t)ty : WOOLLY_TOKEN_NORMAL;
    }
    if (t->model == WOOLLY_TOK_SPM) {
        t->score = malloc((size_t)t->n_vocab * sizeof *t->score);
        if (!t->score)
            return woolly_fail(err, "tokenizer: out of memory");
        for (int32_t i = 0; i < t->n_vocab; i++)
            t->score[i] = scores ? (float)gguf_arr_f64(scores, (uint64_t)i) : 0.0f;
    }
    if (woolly_vocab_build_map(t, err))
        return -1;
    build_decoded(t);

    /* Ids and flags. SentencePiece vocabularies without the keys use their conventional pieces. */
    bool spm = t->model == WOOLLY_TOK_SPM;
    t->bos = spm ? woolly_vocab_lookup(t, "<s>", 3) : -1;
    t->eos = spm ? woolly_vocab_lookup(t, "</s>", 4) : -1;
    t->unk = spm ? woolly_vocab_lookup(t, "<unk>", 5) : -1;
    t->eot = t->eom = -1;
    /* llama.cpp's defaults when the file has no add_bos_token key: SentencePiece and the BPE
     * vocabularies of Llama 3 and Tekken add BOS. Those two also take a whole pre-tokenized piece that
     * is a token as it is, before any merge ("ignore_merges"). */
    bool bos_by_default =
        t->model == WOOLLY_TOK_BPE && (t->pre == WOOLLY_PRETOK_LLAMA3 || t->pre == WOOLLY_PRETOK_TEKKEN);
    t->bpe_whole_piece_first = bos_by_default;
    t->add_bos = spm || bos_by_default;
    t->add_eos = false;
    t->add_space_prefix = spm;
    if (get_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos, err) ||
        get_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos, err) ||
        get_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk, err) ||
        get_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab, &t->eot, err) ||
        get_id(g, "tokenizer.ggml.eom_token_id", t->n_vocab, &t->eom, err) ||
        get_flag(g, "tokenizer.ggml.add_bos_token", &t->add_bos, err) ||
        get_flag(g, "tokenizer.ggml.add_eos_token", &t->add_eos, err) ||
        get_flag(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err))
        return -1;

    if (spm) {
        for (int b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            t->byte_token[b] = woolly_vocab_lookup(t, name, 6);
        }
        t->spm_cut_at_space = spm_can_cut_at_space(t);
    } else if (woolly_bpe_init(t, g, err)) {
        return -1;
    }
    if (build_trie(t, &t->special_all, true, err) || build_trie(t, &t->special_user, false, err) ||
        phi3_rstrip(t, g, err))
        return -1;
    return 0;
}

woolly_tokenizer *woolly_tokenizer_open(const gguf_file *g, woolly_error *err)
{
    woolly_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        woolly_fail(err, "tokenizer: out of memory");
        return NULL;
    }
    if (load(t, g, err)) {
        woolly_tokenizer_close(t);
        return NULL;
    }
    return t;
}

woolly_tokenizer *woolly_tokenizer_open_file(const char *path, woolly_error *err)
{
    gguf_file *g = gguf_open(path, err);
    if (!g)
        return NULL;
    woolly_error e2 = {{0}};
    woolly_tokenizer *t = woolly_tokenizer_open(g, &e2);
    gguf_close(g);
    if (!t)
        woolly_fail(err, "%s: %s", path, e2.msg);
    return t;
}

void woolly_tokenizer_close(woolly_tokenizer *t)
{
    if (!t)
        return;
    free(t->text);
    free(t->text_off);
    free(t->type);
    free(t->score);
    free(t->map.slots);
    free(t->dec);
    free(t->dec_off);
    free(t->merges.keys);
    free(t->merges.rank);
    free(t->merges.merged);
    free(t->special_all.nodes);
    free(t->special_user.nodes);
    free(t->rstrip);
    free(t);
}

/* ---- Queries ---- */

int32_t woolly_tokenizer_n_vocab(const woolly_tokenizer *t)
{
    return t->n_vocab;
}

int32_t woolly_tokenizer_bos(const woolly_tokenizer *t)
{
    return t->bos;
}

int32_t woolly_tokenizer_eos(const woolly_tokenizer *t)
{
    return t->eos;
}

bool woolly_tokenizer_adds_bos(const woolly_tokenizer *t)
{
    return t->add_bos && t->bos >= 0;
}

bool woolly_tokenizer_adds_eos(const woolly_tokenizer *t)
{
    return t->add_eos && t->eos >= 0;
}

bool woolly_tokenizer_is_eog(const woolly_tokenizer *t, int32_t id)
{
    static const char *const EOG_TEXTS[] = {
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "<|end_of_text|>",
        "<EOT>",
        "<\xEF\xBD\x9C"
        "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    };
    if (id < 0 || id >= t->n_vocab)
        return false;
    if (id == t->eos || id == t->eot || id == t->eom)
        return true;
    if (t->type[id] != WOOLLY_TOKEN_CONTROL)
        return false;
    const char *s = t->text + t->text_off[id];
    for (size_t i = 0; i < sizeof EOG_TEXTS / sizeof EOG_TEXTS[0]; i++)
        if (strcmp(s, EOG_TEXTS[i]) == 0)
            return true;
    return false;
}

const char *woolly_tokenizer_piece(const woolly_tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->n_vocab)
        return NULL;
    return t->text + t->text_off[id];
}

int32_t woolly_tokenizer_find(const woolly_tokenizer *t, const char *piece)
{
    return woolly_vocab_lookup(t, piece, strlen(piece));
}

size_t woolly_tokenizer_max_token_bytes(const woolly_tokenizer *t)
{
    return t->max_dec_len;
}

/* ---- Encoding ---- */

/* C's isspace in the "C" locale, as llama.cpp strips with it. */
static bool is_c_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

int64_t woolly_tokenize(const woolly_tokenizer *t, const char *text, size_t len,
                        const woolly_tokenize_opts *opts, int32_t *ids, int64_t cap, woolly_error *err)
{
    woolly_tokenize_opts def = {woolly_tokenizer_adds_bos(t), woolly_tokenizer_adds_eos(t), false};
    if (!opts)
        opts = &def;
    if (!text && len > 0)
        return woolly_fail(err, "tokenizer: no text (NULL) of %zu bytes", len);
    woolly_ids out = {0};
    const woolly_special_trie *tr = opts->parse_special ? &t->special_all : &t->special_user;
    int rc = 0;
    if (opts->add_bos && t->bos >= 0)
        rc = woolly_ids_push(&out, t->bos, err);

    /* Cut out the special tokens (leftmost, longest first) and encode the text between them. In a
     * SentencePiece vocabulary each stretch of text after a special token (or at the start) gets the
     * leading space. */
    bool after_special = true;
    size_t frag = 0;
    for (size_t i = 0; rc == 0 && i <= len; i++) {
        int32_t sid = -1;
        size_t m = 0;
        if (i < len && tr->first_byte[(unsigned char)text[i]])
            m = trie_match(tr, text, i, len, &sid);
        if (m == 0 && i < len)
            continue;
        if (i > frag) {
            if (t->model == WOOLLY_TOK_SPM)
                rc = woolly_spm_encode(t, text + frag, i - frag, t->add_space_prefix && after_special, &out,
                                       err);
            else
                rc = woolly_bpe_encode(t, text + frag, i - frag, &out, err);
            after_special = false;
        }
        if (rc == 0 && m > 0) {
            rc = woolly_ids_push(&out, sid, err);
            after_special = true;
            i += m - 1;
            if (t->rstrip && t->rstrip[sid])
                while (i + 1 < len && is_c_space(text[i + 1]))
                    i++;
            frag = i + 1;
        }
    }
    if (rc == 0 && opts->add_eos && t->eos >= 0)
        rc = woolly_ids_push(&out, t->eos, err);
    if (rc) {
        free(out.v);
        return -1;
    }
    int64_t n = (int64_t)out.n;
    if (ids && cap > 0 && n > 0)
        memcpy(ids, out.v, (size_t)(n < cap ? n : cap) * sizeof *ids);
    free(out.v);
    return n;
}
