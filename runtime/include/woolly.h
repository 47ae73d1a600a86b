/* Woolly's public C API: open a GGUF model, create an evaluation context, tokenize, evaluate tokens,
 * read logits, sample, detokenize.
 *
 *   woolly_model *m = woolly_model_open("model.gguf");
 *   if (!m) fprintf(stderr, "%s\n", woolly_last_error());
 *   woolly_context_params cp = woolly_context_default_params();
 *   woolly_context *c = woolly_context_open(m, &cp);
 *   woolly_token ids[64];
 *   int32_t n = woolly_model_tokenize(m, "Once upon a time", 16, true, false, ids, 64);
 *   woolly_eval(c, ids, n);                       // prompt, in batches
 *   woolly_token t = woolly_sample_greedy(woolly_get_logits(c, -1), woolly_model_n_vocab(m));
 *   ...
 *   woolly_context_close(c);
 *   woolly_model_close(m);
 *
 * Structs are opaque. A function that fails returns NULL or a negative number and leaves a message in
 * woolly_last_error() (per thread). Nothing aborts on bad input. A context is used by one thread at a
 * time; it runs its own pool of n_threads threads. */
#ifndef WOOLLY_H
#define WOOLLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "MAJOR.MINOR.PATCH" */
const char *woolly_version(void);

/* The message of the last failed call on this thread ("" if none). */
const char *woolly_last_error(void);

typedef int32_t woolly_token;
typedef struct woolly_model woolly_model;
typedef struct woolly_context woolly_context;
typedef struct woolly_sampler woolly_sampler;

/* ---- model ---------------------------------------------------------------------------------------- */

/* Maps a GGUF file and validates every tensor the architecture needs (llama, granite). */
woolly_model *woolly_model_open(const char *path);
void woolly_model_close(woolly_model *m);

int32_t woolly_model_n_vocab(const woolly_model *m);
int32_t woolly_model_n_embd(const woolly_model *m); /* the width of the hidden state */
int32_t woolly_model_n_ctx_train(const woolly_model *m);
const char *woolly_model_arch(const woolly_model *m);  /* "llama", "granite" */
const char *woolly_model_name(const woolly_model *m);  /* general.name, or the file name */
uint64_t woolly_model_n_params(const woolly_model *m); /* elements of all tensors */
uint64_t woolly_model_size(const woolly_model *m);     /* bytes of all tensor data */

/* The tuning profile the model runs with (written by `woolly tune`), or NULL for the defaults. Opening
 * a model reads the file WOOLLY_TUNE_PROFILE names ("none": no profile), else this CPU's profile in
 * $XDG_CACHE_HOME/woolly/ (or ~/.cache/woolly/) if there is one; a profile for another CPU or build, or
 * with any malformed line, is rejected whole with one warning line on stderr. Nothing is measured. */
const char *woolly_model_tune_profile(const woolly_model *m);

/* Where the weights the kernels read came from: "repacked at load" (into the kernels' interleaved
 * layouts), "repacked at load, saved to PATH", "mapped from PATH", or "as in the file" (no matrix
 * repacked). PATH is in the repack cache: a model opened from a file keeps its repacked weights in the
 * folder WOOLLY_REPACK_CACHE names ("off": none), else $XDG_CACHE_HOME/woolly/repack (or
 * ~/.cache/woolly/repack), and later loads map them from the page cache instead of repacking, which is
 * most of a load's time. The first load writes about as many bytes as the model file (not when that would
 * leave less than 1 GiB free); a cache that cannot be read or written is reported on stderr and the
 * weights repacked as without it. */
const char *woolly_model_weights_source(const woolly_model *m);

/* ---- tokens --------------------------------------------------------------------------------------- */

woolly_token woolly_token_bos(const woolly_model *m); /* -1 if none */
woolly_token woolly_token_eos(const woolly_model *m); /* -1 if none */
/* True for end-of-generation tokens (EOS, end-of-turn, ...). */
bool woolly_token_is_eog(const woolly_model *m, woolly_token t);
/* Whether the vocabulary asks for a BOS token at the start of a text. */
bool woolly_model_adds_bos(const woolly_model *m);

/* Tokenizes `len` bytes of `text`; add_bos prepends BOS (if the vocabulary has one), parse_special
 * matches control tokens written in the text ("<|im_start|>"). Writes at most cap ids and returns the
 * full count (call again with a larger buffer if it exceeds cap), or -1 on error. */
int32_t woolly_model_tokenize(const woolly_model *m, const char *text, size_t len, bool add_bos,
                              bool parse_special, woolly_token *ids, int32_t cap);

/* The text of n tokens (UTF-8, the SentencePiece leading space of the first token dropped when the
 * vocabulary asks for it). Writes at most cap - 1 bytes plus a NUL; returns the full length, or -1 for
 * an out-of-range token. */
int64_t woolly_model_detokenize(const woolly_model *m, const woolly_token *ids, int32_t n, char *text,
                                size_t cap);

/* ---- context -------------------------------------------------------------------------------------- */

/* The KV cache's element type: F16 (default), F32, or Q8_0 (llama.cpp's quantized cache: blocks of 32
 * int8 values with an F16 scale, half the memory of F16; needs a head dimension divisible by 32). */
typedef enum woolly_kv_type { WOOLLY_KV_F16 = 0, WOOLLY_KV_F32 = 1, WOOLLY_KV_Q8_0 = 2 } woolly_kv_type;

typedef struct woolly_context_params {
    int32_t n_ctx;     /* KV cache positions; 0: the model's context length, capped by memory */
    int32_t n_batch;   /* tokens per forward pass when evaluating a prompt (default 512) */
    int32_t n_threads; /* 0: the number of cores */
    woolly_kv_type kv_type;
    bool logits_all; /* keep the logits of every evaluated token, not only the last */
    /* Sequences the context holds (default 1): each has its own KV cache of n_ctx positions, and one
     * woolly_decode batch may hold tokens of several (see "batches of several sequences" below). */
    int32_t n_seq_max;
} woolly_context_params;

woolly_context_params woolly_context_default_params(void);

woolly_context *woolly_context_open(woolly_model *m, const woolly_context_params *p);
void woolly_context_close(woolly_context *c);

int32_t woolly_context_n_ctx(const woolly_context *c);
int32_t woolly_context_n_batch(const woolly_context *c);
int32_t woolly_context_n_threads(const woolly_context *c);
/* How many of the context's matrix plans (matrices x batch-size classes) run steps from the tuning
 * profile: 0 without one, or when it has none for this thread count. */
int32_t woolly_context_n_tuned(const woolly_context *c);
/* Tokens in the KV cache of sequence 0 (the one woolly_eval uses): the position the next one gets. */
int32_t woolly_context_n_past(const woolly_context *c);
/* Forgets sequence 0's cache from position n_past on (0 clears it), so that evaluation continues there. */
int woolly_context_rewind(woolly_context *c, int32_t n_past);

/* Evaluates n tokens of sequence 0 at positions n_past .. n_past + n - 1: a prompt goes through the
 * batched (GEMM) path in chunks of n_batch, a single token through the decode (GEMV) path. Returns 0,
 * or -1 with a message (bad token id, context full: nothing is evaluated then). With logits_all, n must
 * be at most n_batch so that every position's logits fit. */
int woolly_eval(woolly_context *c, const woolly_token *ids, int32_t n);

/* Logits (n_vocab floats) of token i of the last woolly_eval or woolly_decode call; i = -1 is its last
 * token. After woolly_eval, other positions than the last need logits_all; after woolly_decode, token i
 * must have asked for them. NULL if out of range or nothing has been evaluated. */
const float *woolly_get_logits(woolly_context *c, int32_t i);

/* Embeddings: with on, every later forward pass also keeps each token's final hidden state, after the
 * output norm (what the output matrix turns into logits), n_embd floats per token, for
 * woolly_get_embeddings; off stops that (a pass then costs nothing more). The buffer (n_batch rows) is
 * allocated by the first call with on. 0, or -1 when out of memory. */
int woolly_set_embeddings(woolly_context *c, bool on);
/* The final hidden state of token i of the last woolly_eval or woolly_decode call (-1: its last token),
 * evaluated with embeddings on; after woolly_eval, of its last forward pass only (its last n_batch
 * tokens). NULL if out of range or not kept. */
const float *woolly_get_embeddings(woolly_context *c, int32_t i);

/* ---- batches of several sequences ----------------------------------------------------------------- */

/* A context opened with n_seq_max = N holds N independent sequences (a server's conversations), each
 * with its own KV cache region of n_ctx positions. One woolly_decode call evaluates a batch of tokens
 * from any of them in one forward pass: the matrix products run once over all the batch's tokens (the
 * weights stream from memory once, which is what a decode step costs), attention runs per token over
 * its own sequence's cache. Decoding four sequences together costs little more than decoding one.
 *
 *   woolly_context_params cp = woolly_context_default_params();
 *   cp.n_seq_max = 2;
 *   woolly_context *c = woolly_context_open(m, &cp);
 *   woolly_batch b;
 *   woolly_batch_init(&b, 64);
 *   for (int32_t i = 0; i < n_a; i++)                  // two prompts in one batch
 *       woolly_batch_add(&b, a[i], i, 0, i == n_a - 1); // token, position, sequence, wants logits
 *   for (int32_t i = 0; i < n_b; i++)
 *       woolly_batch_add(&b, bb[i], i, 1, i == n_b - 1);
 *   woolly_decode(c, &b);
 *   woolly_token next_a = woolly_sample_greedy(woolly_get_logits(c, n_a - 1), n_vocab);
 *   woolly_token next_b = woolly_sample_greedy(woolly_get_logits(c, n_a + n_b - 1), n_vocab);
 *   b.n_tokens = 0;                                    // then one token of each per step
 *   woolly_batch_add(&b, next_a, n_a, 0, true);
 *   woolly_batch_add(&b, next_b, n_b, 1, true);
 *   woolly_decode(c, &b);                              // logits: rows 0 and 1
 *   ...
 *   woolly_seq_rewind(c, 0, 0);                        // sequence 0 is done: its cache is free again
 *   woolly_batch_free(&b);
 *
 * tests/example_batch.c is the complete example. */
typedef struct woolly_batch {
    int32_t n_tokens;    /* tokens in the batch */
    int32_t cap;         /* room in the arrays */
    woolly_token *token; /* [cap] */
    int32_t *pos;        /* [cap] each token's position in its sequence */
    int32_t *seq_id;     /* [cap] each token's sequence, 0 .. n_seq_max - 1 */
    bool *logits;        /* [cap] whether its logits are kept; NULL: the batch's last token only */
} woolly_batch;

/* Allocates the arrays of a batch of up to cap tokens (n_tokens 0). 0, or -1 (out of memory). */
int woolly_batch_init(woolly_batch *b, int32_t cap);
void woolly_batch_free(woolly_batch *b);
/* Appends one token. 0, or -1 when the batch is full. */
int woolly_batch_add(woolly_batch *b, woolly_token t, int32_t pos, int32_t seq_id, bool logits);

/* Evaluates a batch of 1 .. n_batch tokens in one forward pass. The tokens of a sequence continue its
 * cache in order: the first one at woolly_seq_n_past, the next at that + 1, and so on (a batch may
 * hold several tokens of a sequence, a prompt chunk). Logits can be kept for at most n_seq_max tokens
 * (n_batch with logits_all); woolly_get_logits(c, i) reads token i's. Returns 0, or -1 with a message,
 * and nothing evaluated, when the batch is invalid: a token id, a sequence id or a position out of
 * range or out of order, a sequence whose cache would overflow n_ctx, too many tokens or logits. */
int woolly_decode(woolly_context *c, const woolly_batch *b);

int32_t woolly_context_n_seq(const woolly_context *c);
/* Tokens in a sequence's cache (the position its next token gets), or -1 for a bad sequence id. */
int32_t woolly_seq_n_past(const woolly_context *c, int32_t seq_id);
/* Forgets a sequence's cache from position n_past on; 0 clears it, and its whole region is free for
 * new tokens at once. 0, or -1 with a message. */
int woolly_seq_rewind(woolly_context *c, int32_t seq_id, int32_t n_past);
/* Makes sequence dst's cache the first n positions of sequence src's (n <= woolly_seq_n_past(c, src)),
 * copied, not evaluated: the keys and values of a position depend only on the tokens up to it, so two
 * sequences that begin alike (a shared system prompt) need that beginning evaluated once. Whatever dst
 * held is forgotten; src is unchanged. 0, or -1 with a message (a bad id, src == dst, n out of range). */
int woolly_seq_copy(woolly_context *c, int32_t src, int32_t dst, int32_t n);

/* ---- context shift -------------------------------------------------------------------------------- */
/* Makes room in a full sequence instead of stopping (llama.cpp's --context-shift): of the n tokens in the
 * sequence's cache (tokens[0..n), the caller's record of them; n must equal woolly_seq_n_past), keeps
 * the first n_keep (a system prompt), forgets the n_discard after them, and moves the rest down to
 * position n_keep, in tokens[] too. The moved tokens are evaluated again at their new positions (exact,
 * whatever the cache's type or layout); woolly_get_logits then gives the last one's logits (none if
 * nothing was moved). Returns the new number of tokens, n - n_discard, or -1 with a message (n_keep < 0,
 * n_discard < 1, n_keep + n_discard > n, n not the sequence's length, a bad sequence id).
 * A chat typically drops half of what follows the system prompt: n_discard = (n - n_keep) / 2. */
int32_t woolly_seq_shift(woolly_context *c, int32_t seq_id, woolly_token *tokens, int32_t n, int32_t n_keep,
                         int32_t n_discard);
/* The same on sequence 0, the one woolly_eval uses. */
int32_t woolly_context_shift(woolly_context *c, woolly_token *tokens, int32_t n, int32_t n_keep,
                             int32_t n_discard);

/* ---- importance statistics (imatrix) -------------------------------------------------------------- */
/* What a quantizer needs to weigh each column's rounding error by how large that column's inputs are:
 * per weight matrix, the sum over every input row it multiplied of each column's square, and the number
 * of rows (per expert for a mixture of experts' matrices); llama.cpp's "imatrix". The output matrix is
 * left out, as llama.cpp's tool leaves it out. */
typedef struct woolly_imatrix woolly_imatrix;
/* Empty statistics for m's matrices; NULL on failure (woolly_last_error). */
woolly_imatrix *woolly_imatrix_open(const woolly_model *m);
void woolly_imatrix_close(woolly_imatrix *im);
/* While attached (im not NULL; its model must be the context's), every evaluation of the context adds
 * to im. The mixture-of-experts FFN then runs a lone token through its batched path (the same sums).
 * 0, or -1 with a message. */
int woolly_context_set_imatrix(woolly_context *c, woolly_imatrix *im);
/* Writes im as llama.cpp's GGUF imatrix file ("<tensor>.in_sum2", "<tensor>.counts"; general.type
 * "imatrix"; imatrix.datasets holds `dataset` if not NULL, imatrix.chunk_count and imatrix.chunk_size the
 * evaluation's), which llama.cpp's llama-quantize --imatrix reads. 0, or -1 with a message. */
int woolly_imatrix_save(const woolly_imatrix *im, const char *path, const char *dataset, uint32_t chunk_count,
                        uint32_t chunk_size);

/* ---- sampling ------------------------------------------------------------------------------------- */

typedef struct woolly_sampler_params {
    float temp;            /* 0: greedy */
    int32_t top_k;         /* 0: off */
    float top_p;           /* 1: off */
    float min_p;           /* 0: off */
    float repeat_penalty;  /* 1: off */
    int32_t repeat_last_n; /* tokens the penalties look back over */
    uint64_t seed;
    /* OpenAI's penalties, subtracted from the logit of every token in the window: presence_penalty
     * once, frequency_penalty once per occurrence. 0: off. */
    float presence_penalty;
    float frequency_penalty;
} woolly_sampler_params;

/* temp 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1, repeat_last_n 64, seed 0, presence and
 * frequency penalties 0. */
woolly_sampler_params woolly_sampler_default_params(void);

/* Preallocates everything: sampling allocates nothing per token. */
woolly_sampler *woolly_sampler_open(const woolly_model *m, const woolly_sampler_params *p);
void woolly_sampler_close(woolly_sampler *s);
/* Picks a token from n_vocab logits (not modified). Does not record it: see woolly_sampler_accept. */
woolly_token woolly_sampler_sample(woolly_sampler *s, const float *logits);
/* OpenAI's logit_bias: adds bias[i] to the logit of token ids[i] before every other step, penalties and
 * a grammar's mask included (within the API's [-100, 100]: -100 all but bans a token, +100 all but forces
 * it). Replaces the biases set before; n 0 clears them. Copies the arrays. 0, or -1 with a message (an id
 * outside the vocabulary, an id given twice, a bias that is not finite, n < 0). */
int woolly_sampler_set_logit_bias(woolly_sampler *s, const woolly_token *ids, const float *bias, int32_t n);
/* Records a token (prompt or generated) in the repetition-penalty window. */
void woolly_sampler_accept(woolly_sampler *s, woolly_token t);
void woolly_sampler_reset(woolly_sampler *s);

/* The id of the largest of n logits (the first one on ties). */
woolly_token woolly_sample_greedy(const float *logits, int32_t n);

/* ---- constrained decoding ------------------------------------------------------------------------- */

/* A compiled grammar: immutable, shareable between samplers and threads. */
typedef struct woolly_grammar woolly_grammar;
/* From GBNF text (llama.cpp's grammar format, start rule `root`); a syntax error names line and column. */
woolly_grammar *woolly_grammar_open_gbnf(const char *text, size_t len);
/* From a JSON Schema (JSON text; `{"type": "object"}` is any JSON object); an unsupported keyword is an
 * error naming it. */
woolly_grammar *woolly_grammar_open_json_schema(const char *json, size_t len);
void woolly_grammar_close(woolly_grammar *g);
/* Constrains s (a sampler of m) to g from now on (NULL: free again); g must outlive s. Each sample then
 * picks only among tokens whose text keeps the output a prefix of g's language, or an end-of-generation
 * token once the output is a whole sentence, and advances the grammar with the token it picks. When no
 * token is allowed, sampling returns the model's end-of-generation token. 0, or -1 with a message. */
int woolly_sampler_set_grammar(woolly_sampler *s, const woolly_model *m, const woolly_grammar *g);
/* Whether the grammar ended the output: it picked an end-of-generation token because the grammar allows
 * nothing else (or nothing at all). False without a grammar. */
bool woolly_sampler_grammar_done(const woolly_sampler *s);
/* Why the grammar could not go on, when it ended the output by failing rather than by its language: it
 * is too ambiguous (more ways to parse the text so far than the matcher holds) or memory ran out. NULL
 * otherwise (and without a grammar). */
const char *woolly_sampler_grammar_error(const woolly_sampler *s);
/* Why the output must end unfinished, or NULL: logits that hold a NaN or +infinity (the model's
 * weights or arithmetic broke down, and any token picked from them would be noise: the sample returned is
 * an end-of-generation token under a grammar, else token 0, and means nothing), or the grammar's failure
 * above. It stays until woolly_sampler_reset; a caller checks it after each sample and ends the output
 * with it as the error. */
const char *woolly_sampler_error(const woolly_sampler *s);

/* ---- speculative decoding ------------------------------------------------------------------------- */

/* Guesses several tokens ahead and checks them with one forward pass of the target model, which reads
 * the weights once for all of them (decoding one token is bound by that read). The guesses come from a
 * draft model (a smaller or lower-bit model of the same vocabulary, in a context of its own) or from
 * prompt lookup (the tokens that followed the latest earlier occurrence of the last `lookup` tokens in the
 * prompt and the text so far), or from both (lookup first). The output is the target's own: greedy
 * (temp 0) gives the same tokens as decoding without speculation, and sampling draws from the same
 * distribution (a guess x drawn from the draft's distribution q is kept with probability min(1, p(x)/q(x)),
 * p the target's after the sampler's penalties, top-k, min-p, temperature and top-p; else the token is
 * drawn from max(0, p - q), normalized). The number of guesses adapts to how many are accepted: with a
 * draft that is rarely right it drops to none, and the draft is only consulted now and then until it
 * does better.
 *
 *   cp.logits_all = true;                                  // the target keeps every position's logits
 *   woolly_context *c = woolly_context_open(m, &cp);
 *   woolly_context *dc = woolly_context_open(draft_model, &draft_cp);
 *   woolly_spec_params sp = woolly_spec_default_params();
 *   woolly_spec *spec = woolly_spec_open(c, dc, &sp);      // NULL: other vocabulary, bad parameter, ...
 *   woolly_spec_begin(spec, prompt, n_prompt);              // evaluates the prompt in the target
 *   woolly_token out[64];
 *   for (int32_t n; (n = woolly_spec_step(spec, smp, out, 64)) > 0;)
 *       ...                                                 // out[0..n): the next tokens
 *
 * A spec uses its contexts' sequence 0 and nothing else may evaluate in them between woolly_spec_begin and
 * the last step. Grammars: only with greedy sampling (temp 0). */
typedef struct woolly_spec woolly_spec;

typedef struct woolly_spec_params {
    int32_t draft_max; /* guesses per step at most, 1 .. 64 (default 8) */
    int32_t lookup;    /* prompt lookup: the n-gram length it matches, 1 .. 16; 0: off (default) */
    bool adaptive;     /* adapt the number of guesses to the acceptance and to the pass and draft costs
                          measured as it runs (default; then a seeded sampled text may vary between runs,
                          its distribution does not); false: always draft_max (as many as the draft source
                          gives), for tests and reproducible sampled text */
} woolly_spec_params;

typedef struct woolly_spec_stats {
    int64_t n_steps;    /* target forward passes of woolly_spec_step */
    int64_t n_drafted;  /* guesses checked */
    int64_t n_accepted; /* guesses accepted */
    int64_t n_tokens;   /* tokens those passes gave (not the first of a text, from the prompt's logits) */
} woolly_spec_stats;

woolly_spec_params woolly_spec_default_params(void);

/* target: opened with logits_all and n_batch > draft_max; draft: a context of a model with the target's
 * vocabulary (token by token; the longer one may have up to 128 more trailing tokens, special ones), or
 * NULL with lookup > 0. Both must outlive the spec. NULL with a message on a bad parameter or vocabulary. */
woolly_spec *woolly_spec_open(woolly_context *target, woolly_context *draft, const woolly_spec_params *p);
void woolly_spec_close(woolly_spec *s);

/* Starts a text of n tokens (n >= 1): the caches keep the longest beginning it shares with the last text
 * (a chat's earlier turns), the target evaluates the rest (at least the last token), so that
 * woolly_get_logits(target, -1) gives the next token's. 0, or -1 with a message. */
int woolly_spec_begin(woolly_spec *s, const woolly_token *ids, int32_t n);

/* The next 1 .. cap tokens (cap >= 1), sampled with smp (greedy when its temp is 0), written to out; each
 * is recorded in smp (woolly_sampler_accept) as it is chosen, so the caller records none of them. The
 * first call after woolly_spec_begin samples one token from the prompt's logits; a later one evaluates
 * the last returned token together with the guesses. A step ends after an end-of-generation token.
 * Returns the count, 0 when the target's context is full (the last returned token could not be
 * evaluated), or -1 with a message. */
int32_t woolly_spec_step(woolly_spec *s, woolly_sampler *smp, woolly_token *out, int32_t cap);

/* Counts since woolly_spec_open. */
woolly_spec_stats woolly_spec_get_stats(const woolly_spec *s);

#ifdef __cplusplus
}
#endif

#endif
