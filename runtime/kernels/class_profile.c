#include "class_profile.h"

#include <stdio.h>
#include <string.h>

#include "profile_text.h"
#include "wtype.h"

typedef struct parse_ctx {
    woolly_class_profile *p;
    const char *file_class; /* the class the file's name gives */
    const woolly_kernel *ks;
    int n_ks;
} parse_ctx;

/* ---- the header --------------------------------------------------------------------------------- */

/* A comma-separated list of decimal numbers. */
static int parse_numbers(char *list, unsigned *out, int *n, const char *what, woolly_error *err)
{
    for (char *s = list;;) {
        char *comma = strchr(s, ',');
        if (comma)
            *comma = 0;
        int64_t v;
        if (*n == WOOLLY_CLASS_MAX_LIST || woolly_profile_parse_i64(s, 0, 0xFFFFFF, &v))
            return woolly_fail(err, "'%s' in the %s list is not a number in [0, %d] (at most %d of them)", s,
                               what, 0xFFFFFF, WOOLLY_CLASS_MAX_LIST);
        out[(*n)++] = (unsigned)v;
        if (!comma)
            return 0;
        s = comma + 1;
    }
}

/* A comma-separated list of names (features as the CPU signature spells them). */
static int parse_names(char *list, char (*out)[WOOLLY_CLASS_WORD_MAX], int *n, const char *what,
                       woolly_error *err)
{
    for (char *s = list;;) {
        char *comma = strchr(s, ',');
        if (comma)
            *comma = 0;
        if (!*s || strlen(s) >= WOOLLY_CLASS_WORD_MAX || *n == WOOLLY_CLASS_MAX_LIST)
            return woolly_fail(err,
                               "'%.40s' in the %s list is not a name of 1 to %d bytes (at most %d of them)",
                               s, what, WOOLLY_CLASS_WORD_MAX - 1, WOOLLY_CLASS_MAX_LIST);
        snprintf(out[(*n)++], WOOLLY_CLASS_WORD_MAX, "%s", s);
        if (!comma)
            return 0;
        s = comma + 1;
    }
}

/* "match ARCH VENDOR [family N,..] [model N,..] [features F,..] [lacks F,..]" */
static int parse_match(woolly_class_match *m, const char *line, woolly_error *err)
{
    static const char *const USAGE =
        "'match ARCH VENDOR [family N,..] [model N,..] [features F,..] [lacks F,..]'";
    char buf[WOOLLY_PROFILE_LINE_MAX];
    snprintf(buf, sizeof buf, "%s", line);
    char *w[WOOLLY_PROFILE_MAX_WORDS];
    const int n = woolly_profile_split_words(buf, w);
    if (n < 3 || n % 2 == 0 || strcmp(w[0], "match"))
        return woolly_fail(err, "'%.60s' is not %s", line, USAGE);
    if (strlen(w[1]) >= sizeof m->arch || strlen(w[2]) >= sizeof m->vendor)
        return woolly_fail(err, "architecture '%.40s' or vendor '%.40s' is too long", w[1], w[2]);
    snprintf(m->arch, sizeof m->arch, "%s", w[1]);
    snprintf(m->vendor, sizeof m->vendor, "%s", w[2]);
    static const char *const KEYS[] = {"family", "model", "features", "lacks"};
    int next_key = 0;
    for (int i = 3; i < n; i += 2) {
        int k = next_key;
        while (k < 4 && strcmp(w[i], KEYS[k]))
            k++;
        if (k == 4)
            return woolly_fail(err,
                               "'%.40s' in the match line: expected family, model, features or lacks, "
                               "once each and in this order",
                               w[i]);
        next_key = k + 1;
        const int rc = k == 0   ? parse_numbers(w[i + 1], m->families, &m->n_families, "family", err)
                       : k == 1 ? parse_numbers(w[i + 1], m->models, &m->n_models, "model", err)
                       : k == 2 ? parse_names(w[i + 1], m->features, &m->n_features, "features", err)
                                : parse_names(w[i + 1], m->lacks, &m->n_lacks, "lacks", err);
        if (rc)
            return -1;
    }
    return 0;
}

static int check_header(void *ctx, int idx, const char *line, woolly_error *err)
{
    parse_ctx *c = ctx;
    switch (idx) {
    case 0: {
        char expect[64];
        snprintf(expect, sizeof expect, "%s %d", WOOLLY_CLASS_PROFILE_MAGIC, WOOLLY_CLASS_PROFILE_FORMAT);
        if (strcmp(line, expect))
            return woolly_fail(err, "'%.40s' is not '%s': not a default profile this build reads", line,
                               expect);
        return 0;
    }
    case 1:
        if (strncmp(line, "class ", 6) || !line[6] || strchr(line + 6, ' ') ||
            strlen(line + 6) >= sizeof c->p->name)
            return woolly_fail(err, "'%.60s' is not 'class NAME' (a name of at most %d bytes)", line,
                               WOOLLY_CLASS_NAME_MAX - 1);
        if (c->file_class && strcmp(line + 6, c->file_class))
            return woolly_fail(err, "the class is '%s', the file's name says '%s'", line + 6, c->file_class);
        snprintf(c->p->name, sizeof c->p->name, "%s", line + 6);
        return 0;
    case 2:
        return parse_match(&c->p->match, line, err);
    }
    return 0;
}

/* ---- the rows ----------------------------------------------------------------------------------- */

static const woolly_kernel *kernel_named(const parse_ctx *c, const char *name)
{
    for (int i = 0; i < c->n_ks; i++)
        if (!strcmp(c->ks[i].name, name))
            return &c->ks[i];
    return NULL;
}

static const char *type_name(enum woolly_type t)
{
    const woolly_type_info *ti = woolly_type_get(t);
    return ti ? ti->name : "?";
}

/* The row for a slot, if the profile has one. */
static const woolly_class_default *row_of(const woolly_class_profile *p, enum woolly_type wtype,
                                          enum woolly_isa isa, enum woolly_tokens_class tokens)
{
    for (int i = 0; i < p->n_defaults; i++) {
        const woolly_kernel *k = p->defaults[i].kernel;
        if (k->wtype == wtype && k->isa == isa && p->defaults[i].tokens == tokens)
            return &p->defaults[i];
    }
    return NULL;
}

/* "default TYPE ISA tokens=CLASS kernel=NAME" */
static int parse_default_row(parse_ctx *c, char **w, int n, woolly_error *err)
{
    if (n != 5)
        return woolly_fail(err, "a default row is 'default TYPE ISA tokens=1|2-16|17+ kernel=NAME'");
    const int t = woolly_type_from_name(w[1]);
    if (t < 0)
        return woolly_fail(err, "'%s' is not a weight type", w[1]);
    const int isa = woolly_isa_from_name(w[2]);
    if (isa < 0)
        return woolly_fail(err, "'%s' is not an ISA level", w[2]);
    const char *tokens = woolly_profile_value_of(w[3], "tokens"),
               *name = woolly_profile_value_of(w[4], "kernel");
    if (!tokens || !name)
        return woolly_fail(err, "words 4 and 5 are '%s' and '%s', expected tokens=... and kernel=...", w[3],
                           w[4]);
    const int cls = woolly_tokens_class_from_name(tokens);
    if (cls < 0)
        return woolly_fail(err, "tokens=%s is not a class (1, 2-16, 17+)", tokens);
    const woolly_kernel *k = kernel_named(c, name);
    if (!k)
        return woolly_fail(err, "kernel '%s' is not in this build", name);
    const enum woolly_op op = woolly_tokens_class_op((enum woolly_tokens_class)cls);
    if (k->op != op || k->wtype != (enum woolly_type)t || k->isa != (enum woolly_isa)isa)
        return woolly_fail(err, "kernel %s is not a %s of %s weights at the %s level", name,
                           op == WOOLLY_OP_GEMV ? "GEMV" : "GEMM", w[1], w[2]);
    if (cls == WOOLLY_TOKENS_SMALL && k->tile_m > 8)
        return woolly_fail(err,
                           "kernel %s takes %d tokens a tile: a default for 2-16 tokens is a small-batch "
                           "tile (at most 8)",
                           name, k->tile_m);
    woolly_class_profile *p = c->p;
    if (row_of(p, k->wtype, k->isa, (enum woolly_tokens_class)cls))
        return woolly_fail(err, "a second default for %s weights at %s, tokens=%s", w[1], w[2], tokens);
    if (p->n_defaults == WOOLLY_CLASS_MAX_DEFAULTS)
        return woolly_fail(err, "more than %d default rows", WOOLLY_CLASS_MAX_DEFAULTS);
    p->defaults[p->n_defaults++] = (woolly_class_default){(enum woolly_tokens_class)cls, k};
    return 0;
}

/* "attn-rounded FORMAT,..." with formats among bf16, f16, i16, each once */
static int parse_rounded_row(parse_ctx *c, char **w, int n, woolly_error *err)
{
    static const enum woolly_act ROUNDED[] = {WOOLLY_ACT_BF16, WOOLLY_ACT_F16, WOOLLY_ACT_I16};
    woolly_class_profile *p = c->p;
    if (n != 2)
        return woolly_fail(err, "an attn-rounded row is 'attn-rounded FORMAT,...' (bf16, f16, i16)");
    if (p->n_rounded_attn)
        return woolly_fail(err, "a second attn-rounded row");
    for (char *s = w[1];;) {
        char *comma = strchr(s, ',');
        if (comma)
            *comma = 0;
        size_t f = 0;
        while (f < sizeof ROUNDED / sizeof ROUNDED[0] && strcmp(s, woolly_act_name(ROUNDED[f])))
            f++;
        if (f == sizeof ROUNDED / sizeof ROUNDED[0])
            return woolly_fail(err, "'%.20s' is not a rounded tiles' format (bf16, f16, i16)", s);
        for (int i = 0; i < p->n_rounded_attn; i++)
            if (p->rounded_attn[i] == ROUNDED[f])
                return woolly_fail(err, "format %s listed twice", s);
        p->rounded_attn[p->n_rounded_attn++] = ROUNDED[f];
        if (!comma)
            return 0;
        s = comma + 1;
    }
}

/* "attn-decode-l2-ahead none|N": the one-query attention path's L2 prefetch, off or N blocks ahead */
static int parse_decode_l2_row(parse_ctx *c, char **w, int n, woolly_error *err)
{
    woolly_class_profile *p = c->p;
    int64_t v = 0;
    if (n != 2 || (strcmp(w[1], "none") && woolly_profile_parse_i64(w[1], 1, WOOLLY_ATTN_MAX_L2_BLOCKS, &v)))
        return woolly_fail(err,
                           "an attn-decode-l2-ahead row is 'attn-decode-l2-ahead none|N' (N from 1 to %d)",
                           WOOLLY_ATTN_MAX_L2_BLOCKS);
    if (p->attn_decode_l2)
        return woolly_fail(err, "a second attn-decode-l2-ahead row");
    p->attn_decode_l2 = v ? (int32_t)v : WOOLLY_ATTN_NO_L2_PREFETCH;
    return 0;
}

static int parse_row(void *ctx, char **w, int n, woolly_error *err)
{
    parse_ctx *c = ctx;
    if (!strcmp(w[0], "default"))
        return parse_default_row(c, w, n, err);
    if (!strcmp(w[0], "attn-rounded"))
        return parse_rounded_row(c, w, n, err);
    if (!strcmp(w[0], "attn-decode-l2-ahead"))
        return parse_decode_l2_row(c, w, n, err);
    return woolly_fail(
        err, "'%.40s' is not a default profile's row (default, attn-rounded, attn-decode-l2-ahead, end)",
        w[0]);
}

/* ---- the whole ---------------------------------------------------------------------------------- */

/* The default of a slot with the profile applied: its row's kernel, else the spec's. The spec may mark a
 * small_default per activation format (a model may prefer another than the default GEMV's): the spec's
 * of format `act` (any when act < 0). */
static const woolly_kernel *resolved(const parse_ctx *c, enum woolly_type wtype, enum woolly_isa isa,
                                     enum woolly_tokens_class tokens, int act)
{
    const woolly_class_default *row = row_of(c->p, wtype, isa, tokens);
    if (row)
        return row->kernel;
    const enum woolly_op op = woolly_tokens_class_op(tokens);
    for (int i = 0; i < c->n_ks; i++) {
        const woolly_kernel *k = &c->ks[i];
        if (k->op == op && k->wtype == wtype && k->isa == isa && (act < 0 || (int)k->act == act) &&
            (tokens == WOOLLY_TOKENS_SMALL ? k->is_small_default : k->is_default))
            return k;
    }
    return NULL;
}

/* Whether the level has a GEMV for the weights at all (the amx level has GEMMs only). */
static bool has_gemv(const parse_ctx *c, enum woolly_type wtype, enum woolly_isa isa)
{
    for (int i = 0; i < c->n_ks; i++)
        if (c->ks[i].op == WOOLLY_OP_GEMV && c->ks[i].wtype == wtype && c->ks[i].isa == isa)
            return true;
    return false;
}

/* Each (weights, level) the rows touch keeps a default GEMV and GEMM, and all its defaults one activation
 * format and layout. A level without GEMVs for the weights takes the default GEMV of the level it nests
 * in, the one its prompts' matrices are decoded with. */
static int check_slots(const parse_ctx *c, woolly_error *err)
{
    for (int i = 0; i < c->p->n_defaults; i++) {
        const woolly_kernel *k = c->p->defaults[i].kernel;
        const char *tn = type_name(k->wtype), *isa = woolly_isa_name(k->isa);
        enum woolly_isa gemv_isa = k->isa;
        while (!has_gemv(c, k->wtype, gemv_isa) && woolly_isa_nests_in(gemv_isa) != gemv_isa)
            gemv_isa = woolly_isa_nests_in(gemv_isa);
        const woolly_kernel *gemv = resolved(c, k->wtype, gemv_isa, WOOLLY_TOKENS_1, -1);
        if (!gemv || !resolved(c, k->wtype, k->isa, WOOLLY_TOKENS_LARGE, -1))
            return woolly_fail(err,
                               "%s weights at %s: a default %s without a default GEMV and GEMM beside it", tn,
                               isa, k->name);
        for (int t = 0; t < WOOLLY_TOKENS_CLASSES; t++) {
            const woolly_kernel *d = resolved(c, k->wtype, k->isa, (enum woolly_tokens_class)t,
                                              t == WOOLLY_TOKENS_SMALL ? (int)gemv->act : -1);
            if (d && (d->act != gemv->act || d->layout != gemv->layout))
                return woolly_fail(err,
                                   "%s weights at %s: default %s and GEMV %s differ in activations or layout",
                                   tn, isa, d->name, gemv->name);
        }
    }
    return 0;
}

int woolly_class_profile_parse(const char *text, size_t len, const char *path, const woolly_kernel *ks,
                               int n_ks, woolly_class_profile *out, woolly_error *err)
{
    memset(out, 0, sizeof *out);
    /* The class is the file's name without its folder and ".profile", when it has that suffix. */
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char file_class[WOOLLY_CLASS_NAME_MAX + 8] = "";
    const size_t bl = strlen(base), sl = strlen(".profile");
    if (bl > sl && bl - sl < sizeof file_class && !strcmp(base + bl - sl, ".profile"))
        snprintf(file_class, sizeof file_class, "%.*s", (int)(bl - sl), base);
    parse_ctx c = {out, file_class[0] ? file_class : NULL, ks, n_ks};
    static const woolly_profile_grammar GRAMMAR = {3, check_header, parse_row};
    if (woolly_profile_text_read(text, len, path, &GRAMMAR, &c, err))
        return -1;
    woolly_error why;
    if (check_slots(&c, &why))
        return woolly_fail(err, "%s: %s", path, why.msg);
    return 0;
}

/* ---- matching ----------------------------------------------------------------------------------- */

static bool in_numbers(const unsigned *list, int n, unsigned v)
{
    for (int i = 0; i < n; i++)
        if (list[i] == v)
            return true;
    return false;
}

/* Whether `name` is one of the comma-separated names of list[0 .. len). */
static bool in_names(const char *list, size_t len, const char *name)
{
    const size_t n = strlen(name);
    for (const char *s = list; s < list + len;) {
        const char *comma = memchr(s, ',', (size_t)(list + len - s));
        const size_t wl = comma ? (size_t)(comma - s) : (size_t)(list + len - s);
        if (wl == n && !strncmp(s, name, n))
            return true;
        s += wl + 1;
    }
    return false;
}

/* The number after " KEY " in the signature. */
static bool sig_number(const char *sig, const char *key, unsigned *out)
{
    char pat[32];
    snprintf(pat, sizeof pat, " %s ", key);
    const char *at = strstr(sig, pat);
    return at && sscanf(at + strlen(pat), "%u", out) == 1;
}

bool woolly_class_profile_matches(const woolly_class_profile *p, const char *sig)
{
    const woolly_class_match *m = &p->match;
    /* "ARCH VENDOR family F model M features A,B,... cores ...": the vendor is what lies between the
     * architecture and " family " (a CPUID vendor string may hold spaces). */
    const char *sp = strchr(sig, ' '), *fam = strstr(sig, " family ");
    if (!sp || !fam || fam < sp)
        return false;
    if ((size_t)(sp - sig) != strlen(m->arch) || strncmp(sig, m->arch, (size_t)(sp - sig)))
        return false;
    if ((size_t)(fam - sp - 1) != strlen(m->vendor) || strncmp(sp + 1, m->vendor, (size_t)(fam - sp - 1)))
        return false;
    unsigned family, model;
    if (!sig_number(sig, "family", &family) || !sig_number(sig, "model", &model))
        return false;
    if ((m->n_families && !in_numbers(m->families, m->n_families, family)) ||
        (m->n_models && !in_numbers(m->models, m->n_models, model)))
        return false;
    const char *feat = strstr(sig, " features ");
    const char *list = feat ? feat + strlen(" features ") : "";
    const size_t len = strcspn(list, " ");
    for (int i = 0; i < m->n_features; i++)
        if (!in_names(list, len, m->features[i]))
            return false;
    for (int i = 0; i < m->n_lacks; i++)
        if (in_names(list, len, m->lacks[i]))
            return false;
    return true;
}
