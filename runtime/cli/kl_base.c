#include "kl_base.h"

#include "perplexity_stats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The records are written and read as the float32 / int32 arrays in memory: that is the file's
 * little-endian layout on the machines this builds for. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kl_base.c writes little-endian records straight from memory"
#endif

uint64_t kl_base_hash(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t hash_i64(uint64_t h, int64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)v >> (8 * i));
    return kl_base_hash(h, b, sizeof b);
}

uint64_t kl_base_vocab_hash(const woolly_model *m)
{
    const int32_t n_vocab = woolly_model_n_vocab(m);
    uint64_t h = KL_BASE_HASH_SEED;
    h = hash_i64(h, n_vocab);
    h = hash_i64(h, woolly_token_bos(m));
    h = hash_i64(h, woolly_token_eos(m));
    h = hash_i64(h, woolly_model_adds_bos(m));
    char small[256];
    char *buf = small;
    size_t cap = sizeof small;
    for (woolly_token id = 0; id < n_vocab; id++) {
        int64_t len = woolly_model_detokenize(m, &id, 1, buf, cap);
        if (len >= 0 && (size_t)len >= cap) { /* a long token: grow the buffer once for it */
            char *big = malloc((size_t)len + 1);
            if (big) {
                if (buf != small)
                    free(buf);
                buf = big;
                cap = (size_t)len + 1;
                len = woolly_model_detokenize(m, &id, 1, buf, cap);
            } else {
                len = -1;
            }
        }
        /* The length goes in too, so that token boundaries count; -1 (no text) is hashed as such. */
        h = hash_i64(h, len);
        if (len > 0)
            h = kl_base_hash(h, buf, (size_t)len);
    }
    if (buf != small)
        free(buf);
    return h;
}

void kl_base_describe(const woolly_model *m, const char *text, size_t len, int64_t n_text_tokens,
                      uint32_t n_ctx, uint32_t n_chunks, uint32_t n_scored, kl_base_header *h)
{
    memset(h, 0, sizeof *h);
    h->version = KL_BASE_VERSION;
    h->n_vocab = (uint32_t)woolly_model_n_vocab(m);
    h->n_ctx = n_ctx;
    h->n_chunks = n_chunks;
    h->n_scored = n_scored;
    h->flags = woolly_model_adds_bos(m) && woolly_token_bos(m) >= 0 ? KL_BASE_FLAG_BOS : 0;
    h->vocab_hash = kl_base_vocab_hash(m);
    h->text_hash = kl_base_hash(KL_BASE_HASH_SEED, text, len);
    h->n_text_tokens = (uint64_t)n_text_tokens;
    snprintf(h->model_name, sizeof h->model_name, "%s", woolly_model_name(m));
}

uint64_t kl_base_record_size(uint32_t n_vocab)
{
    return 4u + 4u * (uint64_t)n_vocab;
}

uint64_t kl_base_file_size(const kl_base_header *h)
{
    return KL_BASE_HEADER_SIZE + (uint64_t)h->n_chunks * h->n_scored * kl_base_record_size(h->n_vocab);
}

/* ---- header bytes --------------------------------------------------------------------------------- */

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int write_failed(const char *path, woolly_error *err)
{
    return woolly_fail(err, "cannot write %s: %s", path, errno ? strerror(errno) : "write error");
}

int kl_base_write_header(FILE *f, const char *path, const kl_base_header *h, woolly_error *err)
{
    unsigned char b[KL_BASE_HEADER_SIZE] = {0};
    memcpy(b, KL_BASE_MAGIC, 8);
    put32(b + 8, h->version);
    put32(b + 12, KL_BASE_HEADER_SIZE);
    put32(b + 16, h->n_vocab);
    put32(b + 20, h->n_ctx);
    put32(b + 24, h->n_chunks);
    put32(b + 28, h->n_scored);
    put32(b + 32, h->flags);
    put64(b + 40, h->vocab_hash);
    put64(b + 48, h->text_hash);
    put64(b + 56, h->n_text_tokens);
    memcpy(b + 64, h->model_name, strnlen(h->model_name, KL_BASE_NAME_SIZE - 1));
    errno = 0;
    if (fwrite(b, 1, sizeof b, f) != sizeof b)
        return write_failed(path, err);
    return 0;
}

int kl_base_write_record(FILE *f, const char *path, int32_t target, const float *logits, uint32_t n_vocab,
                         woolly_error *err)
{
    errno = 0;
    if (fwrite(&target, sizeof target, 1, f) != 1 || fwrite(logits, sizeof(float), n_vocab, f) != n_vocab)
        return write_failed(path, err);
    return 0;
}

int kl_base_read_header(FILE *f, const char *path, kl_base_header *h, woolly_error *err)
{
    static const char *remake = "make it again with woolly perplexity --kl-divergence-base";
    unsigned char b[KL_BASE_HEADER_SIZE];
    const size_t got = fread(b, 1, sizeof b, f);
    if (ferror(f))
        return woolly_fail(err, "cannot read %s: %s", path, strerror(errno));
    if (got < 8 || memcmp(b, KL_BASE_MAGIC, 8) != 0)
        return woolly_fail(err, "%s is not a woolly KL-divergence base (it does not start with \"%s\"); %s",
                           path, KL_BASE_MAGIC, remake);
    if (got < 16)
        return woolly_fail(err, "%s is truncated: %zu bytes, less than its %u-byte header; %s", path, got,
                           KL_BASE_HEADER_SIZE, remake);
    memset(h, 0, sizeof *h);
    h->version = get32(b + 8);
    if (h->version != KL_BASE_VERSION)
        return woolly_fail(
            err, "%s is a KL-divergence base of format version %u; this woolly reads version %u: %s", path,
            h->version, KL_BASE_VERSION, remake);
    const uint32_t header_size = get32(b + 12);
    if (header_size != KL_BASE_HEADER_SIZE)
        return woolly_fail(err, "%s: header size %u, version %u has %u; %s", path, header_size, h->version,
                           KL_BASE_HEADER_SIZE, remake);
    if (got < KL_BASE_HEADER_SIZE)
        return woolly_fail(err, "%s is truncated: %zu bytes, less than its %u-byte header; %s", path, got,
                           KL_BASE_HEADER_SIZE, remake);
    h->n_vocab = get32(b + 16);
    h->n_ctx = get32(b + 20);
    h->n_chunks = get32(b + 24);
    h->n_scored = get32(b + 28);
    h->flags = get32(b + 32);
    h->vocab_hash = get64(b + 40);
    h->text_hash = get64(b + 48);
    h->n_text_tokens = get64(b + 56);
    memcpy(h->model_name, b + 64, KL_BASE_NAME_SIZE);
    h->model_name[KL_BASE_NAME_SIZE - 1] = '\0';

    if (h->n_vocab == 0 || h->n_vocab > KL_BASE_MAX_VOCAB)
        return woolly_fail(err, "%s: n_vocab %u is out of range [1, %u]; the file is damaged", path,
                           h->n_vocab, KL_BASE_MAX_VOCAB);
    if (h->n_ctx < PPL_MIN_CTX || h->n_ctx > KL_BASE_MAX_CTX || h->n_scored != h->n_ctx - 1 - h->n_ctx / 2)
        return woolly_fail(err,
                           "%s: chunks of %u tokens with %u scored positions do not fit; the file is damaged",
                           path, h->n_ctx, h->n_scored);
    if (h->n_chunks == 0 || (uint64_t)h->n_chunks * h->n_ctx > h->n_text_tokens)
        return woolly_fail(err,
                           "%s: %u chunks of %u tokens do not fit a text of %llu tokens; the file is damaged",
                           path, h->n_chunks, h->n_ctx, (unsigned long long)h->n_text_tokens);
    if (h->flags & ~KL_BASE_FLAG_BOS)
        return woolly_fail(err, "%s: unknown flags 0x%x; the file is damaged", path, h->flags);

    struct stat st;
    if (fstat(fileno(f), &st) != 0)
        return woolly_fail(err, "cannot read %s: %s", path, strerror(errno));
    const uint64_t want = kl_base_file_size(h), have = (uint64_t)st.st_size;
    if (have < want)
        return woolly_fail(
            err,
            "%s is truncated: %llu bytes, its header promises %llu (%u chunks x %u positions x "
            "%u logits); %s",
            path, (unsigned long long)have, (unsigned long long)want, h->n_chunks, h->n_scored, h->n_vocab,
            remake);
    if (have > want)
        return woolly_fail(err, "%s has %llu bytes after the %llu its header promises; the file is damaged",
                           path, (unsigned long long)(have - want), (unsigned long long)want);
    return 0;
}

int kl_base_read_record(FILE *f, const char *path, uint32_t n_vocab, int32_t *target, float *logits,
                        woolly_error *err)
{
    if (fread(target, sizeof *target, 1, f) != 1 || fread(logits, sizeof(float), n_vocab, f) != n_vocab)
        return woolly_fail(err, "cannot read %s: %s", path,
                           ferror(f) ? strerror(errno) : "unexpected end of file");
    if (*target < 0 || (uint32_t)*target >= n_vocab)
        return woolly_fail(err, "%s: token id %d is out of range [0, %u); the file is damaged", path, *target,
                           n_vocab);
    return 0;
}

int kl_base_check(const char *path, const kl_base_header *base, const kl_base_header *run, woolly_error *err)
{
    if (base->n_vocab != run->n_vocab || base->vocab_hash != run->vocab_hash || base->flags != run->flags)
        return woolly_fail(
            err,
            "%s was made with another vocabulary (%u tokens, hash %016llx, model '%s'; this model "
            "has %u tokens, hash %016llx): KL divergence compares models of one vocabulary",
            path, base->n_vocab, (unsigned long long)base->vocab_hash, base->model_name, run->n_vocab,
            (unsigned long long)run->vocab_hash);
    if (base->text_hash != run->text_hash || base->n_text_tokens != run->n_text_tokens)
        return woolly_fail(
            err,
            "%s was made from another text (%llu tokens, hash %016llx; this text has %llu tokens, "
            "hash %016llx): give the same -f FILE",
            path, (unsigned long long)base->n_text_tokens, (unsigned long long)base->text_hash,
            (unsigned long long)run->n_text_tokens, (unsigned long long)run->text_hash);
    if (base->n_ctx != run->n_ctx)
        return woolly_fail(
            err,
            "%s was made with chunks of %u tokens (-c %u); this run uses -c %u: use the base's "
            "chunking (leave out -c to take it from the base)",
            path, base->n_ctx, base->n_ctx, run->n_ctx);
    if (base->n_chunks != run->n_chunks)
        return woolly_fail(
            err,
            "%s holds %u chunks; this run scores %u (--chunks): use the base's chunking (leave out "
            "--chunks to take it from the base)",
            path, base->n_chunks, run->n_chunks);
    return 0;
}
