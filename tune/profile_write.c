/* Writing tuning profiles in the format runtime/model/profile.h defines (and parses). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"
#include "tune.h"
#include "user_cache.h"
#include "woolly.h"

static const char *type_name(enum woolly_type t)
{
    const woolly_type_info *ti = woolly_type_get(t);
    return ti ? ti->name : "?";
}

int woolly_profile_write(const woolly_profile *p, FILE *f)
{
    char sig[512], reg[32];
    woolly_cpu_signature(sig, sizeof sig);
    woolly_profile_header_registry(reg, sizeof reg);
    fprintf(f, "%s %d\nwoolly %s\ncpu %s\nregistry %s\nisa %s\naccuracy %s\nmix %d,%d,%d\n",
            WOOLLY_PROFILE_MAGIC, WOOLLY_PROFILE_FORMAT, woolly_version(), sig, reg, woolly_isa_name(p->isa),
            p->strict ? "strict" : "default", p->mix[0], p->mix[1], p->mix[2]);
    fprintf(f, "# Written by `woolly tune`; read by every run on this CPU with this build. Edit nothing: a\n"
               "# profile with any line out of place is rejected whole.\n"
               "# layout TYPE ROWSxCOLS LAYOUT\n");
    for (int32_t i = 0; i < p->n_layouts; i++) {
        const woolly_profile_layout *l = &p->layouts[i];
        fprintf(f, "layout %s %lldx%lld %s\n", type_name(l->type), (long long)l->rows, (long long)l->cols,
                l->layout ? l->layout->name : "rows");
    }
    fprintf(f, "# matmul TYPE ROWSxCOLS tokens= threads= kernel= rows_per_call= tokens_per_call= k_per_call= "
               "prefetch= split= us= default= default_us=\n");
    for (int32_t i = 0; i < p->n_matmuls; i++) {
        const woolly_profile_matmul *r = &p->matmuls[i];
        const woolly_matmul_step *s = &r->step;
        fprintf(f,
                "matmul %s %lldx%lld tokens=%s threads=%d kernel=%s rows_per_call=%d tokens_per_call=%d "
                "k_per_call=%d "
                "prefetch=%d split=%d us=%.3f default=%s default_us=%.3f\n",
                type_name(r->type), (long long)r->rows, (long long)r->cols, woolly_tokens_class_name(r->cls),
                r->threads, s->kernel->name, s->rows_per_call, s->tokens_per_call, s->k_per_call, s->prefetch,
                s->threads, r->us, r->default_kernel->name, r->default_us);
    }
    fprintf(f, "# attn CACHE dHEAD_DIM decode|prefill threads= kernel= queries_per_call= kv_split= queries= "
               "positions= us= default= default_us=\n");
    for (int32_t i = 0; i < p->n_attns; i++) {
        const woolly_profile_attn *r = &p->attns[i];
        fprintf(f,
                "attn %s d%d %s threads=%d kernel=%s queries_per_call=%d kv_split=%d queries=%d positions=%d "
                "us=%.3f default=%s default_us=%.3f\n",
                type_name(r->cache), r->head_dim, woolly_attn_phase_name(r->phase), r->threads,
                r->kernel->name, r->queries_per_call, r->kv_split, r->queries, r->positions, r->us,
                r->default_kernel->name, r->default_us);
    }
    fprintf(f, "end %d\n", p->n_layouts + p->n_matmuls + p->n_attns);
    return ferror(f) ? -1 : 0;
}

int woolly_profile_save(const woolly_profile *p, const char *path, woolly_error *err)
{
    if (woolly_make_parent_dirs(path, err))
        return -1;
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return woolly_fail(err, "cannot write %s: %s", tmp, strerror(errno));
    const int wrc = woolly_profile_write(p, f);
    if (fclose(f) != 0 || wrc) {
        remove(tmp);
        return woolly_fail(err, "cannot write %s", tmp);
    }
    if (rename(tmp, path) != 0) {
        const int e = errno;
        remove(tmp);
        return woolly_fail(err, "cannot rename %s to %s: %s", tmp, path, strerror(e));
    }
    return 0;
}
