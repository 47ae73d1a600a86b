/* The public API over the internal modules: errors become woolly_last_error() messages. */
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "sampler.h"

static _Thread_local woolly_error g_last_error;

void woolly_set_last_error(const woolly_error *e)
{
    g_last_error = *e;
}

const char *woolly_last_error(void)
{
    return g_last_error.msg;
}

static void fail(const char *fmt, const char *arg)
{
    woolly_error e;
    woolly_fail(&e, fmt, arg);
    woolly_set_last_error(&e);
}

woolly_model *woolly_model_open(const char *path)
{
    woolly_error err = {{0}};
    if (!path) {
        fail("%s", "woolly_model_open: no path");
        return NULL;
    }
    woolly_model *m = woolly_model_load(path, &err);
    if (!m)
        woolly_set_last_error(&err);
    return m;
}

int32_t woolly_model_n_embd(const woolly_model *m)
{
    return m->cfg.n_embd;
}

int32_t woolly_model_n_vocab(const woolly_model *m)
{
    return m->cfg.n_vocab;
}
int32_t woolly_model_n_ctx_train(const woolly_model *m)
{
    return m->cfg.n_ctx_train;
}
const char *woolly_model_arch(const woolly_model *m)
{
    return m->arch_name;
}
const char *woolly_model_name(const woolly_model *m)
{
    return m->name;
}
uint64_t woolly_model_n_params(const woolly_model *m)
{
    return m->n_params;
}
uint64_t woolly_model_size(const woolly_model *m)
{
    return m->n_bytes;
}
const char *woolly_model_tune_profile(const woolly_model *m)
{
    return m->profile ? m->profile->path : NULL;
}

const char *woolly_model_weights_source(const woolly_model *m)
{
    return m->weights_text;
}

woolly_token woolly_token_bos(const woolly_model *m)
{
    return m->tok ? woolly_tokenizer_bos(m->tok) : -1;
}
woolly_token woolly_token_eos(const woolly_model *m)
{
    return m->tok ? woolly_tokenizer_eos(m->tok) : -1;
}

bool woolly_token_is_eog(const woolly_model *m, woolly_token t)
{
    return m->tok ? woolly_tokenizer_is_eog(m->tok, t) : false;
}

bool woolly_model_adds_bos(const woolly_model *m)
{
    return m->tok ? woolly_tokenizer_adds_bos(m->tok) : false;
}

static bool need_tokenizer(const woolly_model *m)
{
    if (m->tok)
        return true;
    woolly_error e;
    woolly_fail(&e, "%s: no usable tokenizer: %s", m->label, m->tok_err.msg);
    woolly_set_last_error(&e);
    return false;
}

int32_t woolly_model_tokenize(const woolly_model *m, const char *text, size_t len, bool add_bos,
                              bool parse_special, woolly_token *ids, int32_t cap)
{
    if (!need_tokenizer(m))
        return -1;
    woolly_error err = {{0}};
    const woolly_tokenize_opts opts = {.add_bos = add_bos, .add_eos = false, .parse_special = parse_special};
    const int64_t n = woolly_tokenize(m->tok, text, len, &opts, ids, cap < 0 ? 0 : cap, &err);
    if (n < 0) {
        woolly_set_last_error(&err);
        return -1;
    }
    if (n > INT32_MAX) {
        fail("%s", "text has more than 2^31 tokens");
        return -1;
    }
    return (int32_t)n;
}

int64_t woolly_model_detokenize(const woolly_model *m, const woolly_token *ids, int32_t n, char *text,
                                size_t cap)
{
    if (!need_tokenizer(m))
        return -1;
    woolly_detok_stream s;
    woolly_detok_stream_init(&s, m->tok);
    char piece[1024];
    int64_t total = 0;
    for (int32_t i = 0; i <= n; i++) {
        const int64_t k = i < n ? woolly_detok_stream_feed(&s, ids[i], piece, sizeof piece)
                                : woolly_detok_stream_flush(&s, piece, sizeof piece);
        if (k < 0 && i == n) {
            fail("%s", "detokenize: the stream could not be flushed");
            return -1;
        }
        if (k < 0) {
            woolly_error e;
            woolly_fail(&e, "detokenize: token id %d (at index %d) is out of range [0, %d)", ids[i], i,
                        woolly_tokenizer_n_vocab(m->tok));
            woolly_set_last_error(&e);
            return -1;
        }
        for (int64_t j = 0; j < k; j++, total++)
            if (cap && (size_t)total + 1 < cap)
                text[total] = piece[j];
    }
    if (cap)
        text[(size_t)total < cap ? (size_t)total : cap - 1] = 0;
    return total;
}

woolly_sampler *woolly_sampler_open(const woolly_model *m, const woolly_sampler_params *p)
{
    woolly_error err = {{0}};
    const woolly_sampler_params def = woolly_sampler_default_params();
    woolly_sampler *s = woolly_sampler_create(m->cfg.n_vocab, p ? p : &def, &err);
    if (!s)
        woolly_set_last_error(&err);
    return s;
}
