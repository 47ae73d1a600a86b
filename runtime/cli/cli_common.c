#include "cli_common.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cpu.h"
#include "threadpool.h"

void cli_add(cli_table *t, cli_flag f)
{
    if (t->n < CLI_MAX_FLAGS) /* the tables are static in the commands; a full one is a coding error */
        t->flags[t->n++] = f;
}

void cli_add_required(cli_table *t, cli_flag f)
{
    cli_add(t, f);
    if (t->n > 0)
        t->required[t->n - 1] = true;
}

static const cli_flag *lookup(const cli_table *t, const char *name, size_t len)
{
    for (int i = 0; i < t->n; i++) {
        const cli_flag *f = &t->flags[i];
        if ((f->short_name && strlen(f->short_name) == len && !strncmp(f->short_name, name, len)) ||
            (f->long_name && strlen(f->long_name) == len && !strncmp(f->long_name, name, len)))
            return f;
    }
    return NULL;
}

/* Whether v is one of the '|'-separated names. */
static bool in_list(const char *names, const char *v)
{
    for (const char *p = names; *p; p += *p == '|') {
        const size_t n = strcspn(p, "|");
        if (strlen(v) == n && !strncmp(p, v, n))
            return true;
        p += n;
    }
    return false;
}

static int bad_value(const char *cmd, const char *flag, const char *v, const char *what)
{
    fprintf(stderr, "woolly %s: %s '%s' is not %s\n", cmd, flag, v, what);
    return -1;
}

static int set_value(const char *cmd, const char *flag, const cli_flag *f, const char *v)
{
    const bool any = f->lo == f->hi; /* no range beyond the type's own */
    const double lo = any ? (f->kind == CLI_INT ? INT32_MIN : -HUGE_VAL) : f->lo;
    const double hi = any ? (f->kind == CLI_INT ? INT32_MAX : HUGE_VAL) : f->hi;
    char *end;
    errno = 0;
    switch (f->kind) {
    case CLI_INT:
    case CLI_I64: {
        const long long x = strtoll(v, &end, 10);
        if (end == v || *end || errno)
            return bad_value(cmd, flag, v, "an integer");
        if ((double)x < lo || (double)x > hi) {
            fprintf(stderr, "woolly %s: %s %lld is out of range [%.0f, %.0f]\n", cmd, flag, x, lo, hi);
            return -1;
        }
        if (f->kind == CLI_INT)
            *(int32_t *)f->dst = (int32_t)x;
        else
            *(int64_t *)f->dst = x;
        return 0;
    }
    case CLI_U64: {
        const unsigned long long x = strtoull(v, &end, 10);
        if (*v == '-' || end == v || *end || errno)
            return bad_value(cmd, flag, v, "an integer in [0, 2^64-1]");
        *(uint64_t *)f->dst = x;
        return 0;
    }
    case CLI_FLOAT: {
        const double x = strtod(v, &end);
        if (end == v || *end || errno || !isfinite((float)x))
            return bad_value(cmd, flag, v, "a finite number");
        if (x < lo || x > hi) {
            fprintf(stderr, "woolly %s: %s %g is out of range [%g, %g]\n", cmd, flag, x, lo, hi);
            return -1;
        }
        *(float *)f->dst = (float)x;
        return 0;
    }
    case CLI_ENUM:
        if (!in_list(f->meta, v)) {
            fprintf(stderr, "woolly %s: unknown %s '%s' (expected %s)\n", cmd, flag, v, f->meta);
            return -1;
        }
        /* fall through */
    case CLI_STR:
        *(const char **)f->dst = v;
        return 0;
    case CLI_BOOL:
    case CLI_BOOL_OFF:
        *(bool *)f->dst = f->kind == CLI_BOOL;
        return 0;
    }
    return -1;
}

static void usage(FILE *out, const cli_table *t, const char *cmd)
{
    fprintf(out, "usage: woolly %s %s\n\n%s%soptions:\n", cmd, t->synopsis, t->about ? t->about : "",
            t->about ? "\n" : "");
    for (int i = 0; i < t->n; i++) {
        const cli_flag *f = &t->flags[i];
        const bool no_value = f->kind == CLI_BOOL || f->kind == CLI_BOOL_OFF;
        char names[128];
        snprintf(names, sizeof names, "%s%s%s%s%s", f->short_name ? f->short_name : "",
                 f->short_name ? ", " : "", f->long_name, no_value ? "" : " ",
                 no_value ? "" : (f->meta ? f->meta : "X"));
        if (strlen(names) > 28) { /* a long list of names: the help goes on the next line */
            fprintf(out, "  %s\n", names);
            names[0] = '\0';
        }
        fprintf(out, "  %-28s %s\n", names, f->help);
    }
    if (t->max_args > 0)
        fprintf(out, "  %-28s %s\n", "--", "what follows are arguments, even if they start with '-'");
    fprintf(out, "  %-28s %s\n", "-h, --help", "show this help");
}

int cli_parse(cli_table *t, int argc, char **argv)
{
    const char *cmd = argv[0];
    bool options_done = false, given[CLI_MAX_FLAGS] = {false};
    t->n_args = 0;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (!options_done && !strcmp(a, "--")) {
            options_done = true;
            continue;
        }
        /* An argument: no flag is "-" or looks like a negative integer (a token id, say). */
        if (options_done || a[0] != '-' || !a[1] || !a[1 + strspn(a + 1, "0123456789")]) {
            if (t->n_args == t->max_args) {
                fprintf(stderr, "woolly %s: unexpected argument '%s'%s%s (see woolly %s --help)\n", cmd, a,
                        t->max_args ? " after " : "", t->max_args ? t->args : "", cmd);
                return 2;
            }
            argv[++t->n_args] = a; /* slot n_args <= i: already read */
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout, t, cmd);
            return 0;
        }
        const char *eq = a[1] == '-' ? strchr(a, '=') : NULL; /* --flag=value */
        const size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const cli_flag *f = lookup(t, a, len);
        if (!f) {
            fprintf(stderr, "woolly %s: unknown option '%.*s' (see woolly %s --help)\n", cmd, (int)len, a,
                    cmd);
            return 2;
        }
        char flag[64];
        snprintf(flag, sizeof flag, "%.*s", (int)len, a);
        const char *v = NULL;
        if (f->kind == CLI_BOOL || f->kind == CLI_BOOL_OFF) {
            if (eq) {
                fprintf(stderr, "woolly %s: %s takes no value\n", cmd, flag);
                return 2;
            }
        } else if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            fprintf(stderr, "woolly %s: %s needs a value (%s)\n", cmd, flag, f->meta ? f->meta : "VALUE");
            return 2;
        }
        if (set_value(cmd, flag, f, v))
            return 2;
        if (f->count)
            ++*f->count;
        given[f - t->flags] = true;
    }
    for (int j = 0; j < t->n; j++)
        if (t->required[j] && !given[j]) {
            const cli_flag *f = &t->flags[j];
            fprintf(stderr, "woolly %s: %s %s is required (see woolly %s --help)\n", cmd,
                    f->short_name ? f->short_name : f->long_name, f->meta ? f->meta : "VALUE", cmd);
            return 2;
        }
    if (t->n_args < t->min_args) {
        fprintf(stderr, "woolly %s: expected %s, got %d argument%s (see woolly %s --help)\n", cmd, t->args,
                t->n_args, t->n_args == 1 ? "" : "s", cmd);
        return 2;
    }
    return CLI_PROCEED;
}

/* ---- flag groups ---------------------------------------------------------------------------------- */

void cli_add_model_flag(cli_table *t, const char **path)
{
    cli_add_required(t, (cli_flag){"-m", "--model", CLI_STR, path, 0, 0, "MODEL", "the GGUF model", NULL});
}

void cli_add_context_flags(cli_table *t, cli_context_opts *o)
{
    o->n_ctx = 0;
    o->n_batch = 512;
    o->n_threads = woolly_cpu_get()->n_cores > 0 ? woolly_cpu_get()->n_cores : 1;
    if (o->n_threads > WOOLLY_MAX_THREADS)
        o->n_threads = WOOLLY_MAX_THREADS;
    o->kv_type = "f16";
    o->tune_profile = NULL;
    o->repack_cache = NULL;
    o->n_ctx_given = 0;
    cli_add(t, (cli_flag){"-t", "--threads", CLI_INT, &o->n_threads, 1, WOOLLY_MAX_THREADS, "N",
                          "threads (default: the number of cores)", NULL});
    cli_add(t, (cli_flag){
                   "-c", "--ctx-size", CLI_INT, &o->n_ctx, 1, 1 << 24, "N",
                   "context size in tokens (default: the model's, at most 4096 and what fits in 1/4 of RAM)",
                   &o->n_ctx_given});
    cli_add(t, (cli_flag){"-b", "--batch-size", CLI_INT, &o->n_batch, 1, 1 << 16, "N",
                          "tokens per prompt-processing batch (default 512)", NULL});
    cli_add(t, (cli_flag){NULL, "--kv-type", CLI_ENUM, &o->kv_type, 0, 0, "f16|f32|q8_0",
                          "KV cache type; q8_0 takes half the memory of f16 (default f16)", NULL});
    cli_add(t,
            (cli_flag){NULL, "--tune-profile", CLI_STR, &o->tune_profile, 0, 0, "FILE",
                       "the tuning profile to run with ('none': the defaults; default: WOOLLY_TUNE_PROFILE, "
                       "else this CPU's from `woolly tune`)",
                       NULL});
    cli_add(t, (cli_flag){NULL, "--repack-cache", CLI_STR, &o->repack_cache, 0, 0, "DIR",
                          "the folder of repacked weights later loads map ('off': none; default: "
                          "WOOLLY_REPACK_CACHE, else ~/.cache/woolly/repack)",
                          NULL});
}

woolly_kv_type cli_kv_type(const char *name)
{
    return !strcmp(name, "f32") ? WOOLLY_KV_F32 : !strcmp(name, "q8_0") ? WOOLLY_KV_Q8_0 : WOOLLY_KV_F16;
}

void cli_context_params(const char *cmd, const cli_context_opts *o, const woolly_model *m,
                        woolly_context_params *p)
{
    *p = woolly_context_default_params();
    p->kv_type = cli_kv_type(o->kv_type);
    p->n_ctx = o->n_ctx_given ? o->n_ctx : 0;
    p->n_batch = o->n_batch;
    p->n_threads = o->n_threads;
    if (o->n_ctx_given && o->n_ctx > woolly_model_n_ctx_train(m))
        fprintf(stderr,
                "woolly %s: warning: --ctx-size %d exceeds the %d positions the model was trained with; "
                "quality may degrade past them\n",
                cmd, o->n_ctx, woolly_model_n_ctx_train(m));
}

void cli_add_sampling_flags(cli_table *t, cli_sampling_opts *o)
{
    o->p = woolly_sampler_default_params();
    o->seed_given = 0;
    cli_add(t, (cli_flag){NULL, "--temp", CLI_FLOAT, &o->p.temp, 0, 100, "T",
                          "temperature; 0 is greedy (default 0.8)", NULL});
    cli_add(t, (cli_flag){NULL, "--top-k", CLI_INT, &o->p.top_k, 0, INT32_MAX, "K",
                          "keep the K most likely tokens; 0 = off (default 40)", NULL});
    cli_add(t,
            (cli_flag){NULL, "--top-p", CLI_FLOAT, &o->p.top_p, 1e-9, 1, "P",
                       "keep the most likely tokens up to probability mass P; 1 = off (default 0.95)", NULL});
    cli_add(t,
            (cli_flag){NULL, "--min-p", CLI_FLOAT, &o->p.min_p, 0, 1, "P",
                       "drop tokens less likely than P times the most likely; 0 = off (default 0.05)", NULL});
    cli_add(t, (cli_flag){NULL, "--repeat-penalty", CLI_FLOAT, &o->p.repeat_penalty, 1e-6, 100, "X",
                          "penalize recently seen tokens; 1 = off (default 1)", NULL});
    cli_add(t, (cli_flag){NULL, "--repeat-last-n", CLI_INT, &o->p.repeat_last_n, 0, 1 << 20, "N",
                          "tokens the penalties look back over (default 64)", NULL});
    cli_add(t,
            (cli_flag){NULL, "--presence-penalty", CLI_FLOAT, &o->p.presence_penalty, -100, 100, "X",
                       "subtract X from the logits of tokens seen in the window; 0 = off (default 0)", NULL});
    cli_add(t, (cli_flag){NULL, "--frequency-penalty", CLI_FLOAT, &o->p.frequency_penalty, -100, 100, "X",
                          "subtract X per occurrence in the window; 0 = off (default 0)", NULL});
    o->logit_bias = NULL;
    o->n_bias = 0;
    cli_add(t, (cli_flag){NULL, "--logit-bias", CLI_STR, &o->logit_bias, 0, 0, "ID(+|-)B[,...]",
                          "add B (in [-100, 100]) to token ID's logit before the other steps: 13+1.5 favours "
                          "token 13, 2-100 all but bans token 2 (default: none)",
                          NULL});
    cli_add(t, (cli_flag){NULL, "--seed", CLI_U64, &o->p.seed, 0, 0, "S",
                          "random seed (default: from the clock, printed)", &o->seed_given});
}

/* --logit-bias's list: "ID+B" or "ID-B" items separated by commas. */
static int parse_logit_bias(const char *cmd, cli_sampling_opts *o)
{
    o->n_bias = 0;
    for (const char *s = o->logit_bias; s && *s;) {
        char *end;
        errno = 0;
        const long id = isdigit((unsigned char)*s) ? strtol(s, &end, 10) : -1;
        double b = 0.0;
        bool ok = id >= 0 && errno == 0 && id <= INT32_MAX && (*end == '+' || *end == '-');
        if (ok) {
            const char *num = end;
            errno = 0;
            b = strtod(num, &end);
            ok = end > num + 1 && errno == 0 && ((*end == ',' && end[1]) || *end == 0) && b >= -100.0 &&
                 b <= 100.0;
        }
        if (!ok) {
            fprintf(
                stderr,
                "woolly %s: --logit-bias '%s': expected ID+B or ID-B items separated by commas, each B in "
                "[-100, 100] (at '%.*s')\n",
                cmd, o->logit_bias, (int)strcspn(s, ","), s);
            return -1;
        }
        if (o->n_bias == CLI_MAX_LOGIT_BIAS) {
            fprintf(stderr, "woolly %s: --logit-bias: more than %d tokens\n", cmd, CLI_MAX_LOGIT_BIAS);
            return -1;
        }
        o->bias_id[o->n_bias] = (woolly_token)id;
        o->bias[o->n_bias++] = (float)b;
        s = *end ? end + 1 : end;
    }
    return 0;
}

int cli_sampling_finish(const char *cmd, cli_sampling_opts *o, bool pick_seed)
{
    if (parse_logit_bias(cmd, o))
        return -1;
    if (!pick_seed || o->seed_given || o->p.temp == 0.0f)
        return 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    o->p.seed = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec;
    fprintf(stderr, "woolly %s: seed %llu\n", cmd, (unsigned long long)o->p.seed);
    return 0;
}

woolly_sampler *cli_open_sampler(const woolly_model *m, const cli_sampling_opts *o)
{
    woolly_sampler *s = woolly_sampler_open(m, &o->p);
    if (s && woolly_sampler_set_logit_bias(s, o->bias_id, o->bias, o->n_bias)) {
        woolly_sampler_close(s);
        return NULL;
    }
    return s;
}

/* ---- helpers -------------------------------------------------------------------------------------- */

double cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cli_api_error(const char *cmd)
{
    fprintf(stderr, "woolly %s: %s\n", cmd, woolly_last_error());
}

woolly_model *cli_open_model(const char *cmd, const char *path, const cli_context_opts *o, double *load_s)
{
    if (!path) {
        fprintf(stderr, "woolly %s: no model given (-m MODEL.gguf)\n", cmd);
        return NULL;
    }
    if (o && o->tune_profile) /* the library reads the variable when it opens the model */
        setenv("WOOLLY_TUNE_PROFILE", o->tune_profile, 1);
    if (o && o->repack_cache)
        setenv("WOOLLY_REPACK_CACHE", o->repack_cache, 1);
    const double t0 = cli_now_s();
    woolly_model *m = woolly_model_open(path);
    if (!m) {
        cli_api_error(cmd);
        return NULL;
    }
    if (load_s)
        *load_s = cli_now_s() - t0;
    return m;
}

void cli_profile_text(const woolly_model *m, const woolly_context *c, char *buf, size_t n)
{
    const char *path = woolly_model_tune_profile(m);
    if (!path)
        snprintf(buf, n, "defaults");
    else
        snprintf(buf, n, "%s (%d tuned steps for %d threads)", path, woolly_context_n_tuned(c),
                 woolly_context_n_threads(c));
}

int32_t cli_parse_tokens(const char *cmd, const char *s, int32_t n_vocab, woolly_token **out)
{
    int32_t n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    woolly_token *ids = malloc(sizeof *ids * (size_t)n);
    if (!ids) {
        fprintf(stderr, "woolly %s: out of memory for %d tokens\n", cmd, n);
        return -1;
    }
    const char *p = s;
    for (int32_t i = 0; i < n; i++) {
        char *end;
        errno = 0;
        while (*p == ' ')
            p++;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || (*end && *end != ',' && *end != ' ')) {
            fprintf(stderr, "woolly %s: token %d of --tokens is not an integer: '%.*s'\n", cmd, i,
                    (int)strcspn(p, ","), p);
            free(ids);
            return -1;
        }
        if (v < 0 || v >= n_vocab) {
            fprintf(stderr, "woolly %s: token id %lld (at index %d) is out of range [0, %d)\n", cmd, v, i,
                    n_vocab);
            free(ids);
            return -1;
        }
        ids[i] = (woolly_token)v;
        p = end;
        while (*p == ' ')
            p++;
        if (*p == ',')
            p++;
    }
    *out = ids;
    return n;
}

woolly_token *cli_tokenize(const char *cmd, const woolly_model *m, const char *text, bool add_bos, int32_t *n)
{
    const size_t len = strlen(text);
    int32_t cap = (int32_t)(len > (size_t)INT32_MAX - 8 ? INT32_MAX - 8 : len) + 8;
    woolly_token *ids = malloc(sizeof *ids * (size_t)cap);
    if (!ids) {
        fprintf(stderr, "woolly %s: out of memory\n", cmd);
        return NULL;
    }
    int32_t k = woolly_model_tokenize(m, text, len, add_bos, true, ids, cap);
    if (k > cap) { /* more tokens than bytes + 8: cannot happen for sane vocabularies, but be exact */
        woolly_token *bigger = realloc(ids, sizeof *ids * (size_t)k);
        if (!bigger) {
            free(ids);
            fprintf(stderr, "woolly %s: out of memory\n", cmd);
            return NULL;
        }
        ids = bigger;
        k = woolly_model_tokenize(m, text, len, add_bos, true, ids, k);
    }
    if (k < 0) {
        cli_api_error(cmd);
        free(ids);
        return NULL;
    }
    *n = k;
    return ids;
}

char *cli_read_file(const char *cmd, const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "woolly %s: cannot read '%s': %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *bigger = realloc(buf, cap * 2 + 1);
        if (!bigger)
            free(buf);
        buf = bigger;
        cap *= 2;
    }
    const int read_errno = errno;
    if (buf && ferror(f)) {
        fprintf(stderr, "woolly %s: cannot read '%s': %s\n", cmd, path, strerror(read_errno));
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "woolly %s: out of memory reading '%s'\n", cmd, path);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

bool cli_output_is_input(const char *cmd, const char *out, const char *in)
{
    struct stat so, si;
    if (!out || !in || stat(out, &so) != 0 || stat(in, &si) != 0)
        return false;
    if (so.st_dev != si.st_dev || so.st_ino != si.st_ino)
        return false;
    fprintf(stderr, "woolly %s: the output %s is the input %s: refusing to overwrite it\n", cmd, out, in);
    return true;
}

woolly_token *cli_tokenize_text(const char *cmd, const woolly_model *m, const char *text, size_t len, int32_t *n)
{
    if (len > (size_t)INT32_MAX - 8) {
        fprintf(stderr, "woolly %s: the text is too long (%zu bytes; at most %d)\n", cmd, len, INT32_MAX - 8);
        return NULL;
    }
    int32_t cap = (int32_t)len + 8;
    woolly_token *ids = malloc(sizeof *ids * (size_t)cap);
    if (!ids) {
        fprintf(stderr, "woolly %s: out of memory for the tokens of %zu bytes\n", cmd, len);
        return NULL;
    }
    int32_t k = woolly_model_tokenize(m, text, len, woolly_model_adds_bos(m), false, ids, cap);
    if (k > cap) {
        woolly_token *bigger = realloc(ids, sizeof *ids * (size_t)k);
        if (!bigger) {
            free(ids);
            fprintf(stderr, "woolly %s: out of memory for %d tokens\n", cmd, k);
            return NULL;
        }
        ids = bigger;
        k = woolly_model_tokenize(m, text, len, woolly_model_adds_bos(m), false, ids, k);
    }
    if (k < 0) {
        cli_api_error(cmd);
        free(ids);
        return NULL;
    }
    *n = k;
    return ids;
}

char *cli_read_text(const char *cmd, const char *path, size_t *len, const char *to)
{
    char *text = cli_read_file(cmd, path, len);
    if (text && *len == 0) {
        fprintf(stderr, "woolly %s: '%s' is empty: there is no text to %s\n", cmd, path, to);
        free(text);
        return NULL;
    }
    return text;
}
