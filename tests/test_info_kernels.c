/* `woolly info --kernels`: every registered kernel is listed with its ISA and layout, the kernels this CPU
 * selects are those the registry chooses, the class whose shipped profile gives the defaults is named, and
 * the flag takes no model. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "testutil.h"

/* The listing's line for a kernel (a pointer into out), or NULL. */
static const char *line_of(const char *out, const char *name)
{
    for (const char *p = out; (p = strstr(p, name)); p++)
        if (p[-1] == ' ' && p[strlen(name)] == ' ')
            return p;
    return NULL;
}

Test(info_kernels, lists_the_registry_and_the_selection)
{
    char *out, *err;
    cr_assert_eq(tu_run_cli("info --kernels", &out, &err), 0, "%s", err);
    cr_assert(strstr(out, "active level: "), "%s", out);
    /* the class whose shipped profile gives the defaults, as the registry resolved it in this process */
    char defaults[128];
    const char *cls = woolly_kernel_defaults_class();
    if (cls)
        snprintf(defaults, sizeof defaults, "\ndefaults: shipped profile %s,", cls);
    else
        snprintf(defaults, sizeof defaults, "\ndefaults: the spec's");
    cr_assert(strstr(out, defaults), "no '%s' line:\n%s", defaults + 1, out);
    int n;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    for (int i = 0; i < n; i++) {
        const char *l = line_of(out, ks[i].name);
        cr_assert(l, "%s is not listed", ks[i].name);
        const char *eol = strchr(l, '\n');
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)(eol ? eol - l : (long)strlen(l)), l);
        cr_assert(strstr(line, woolly_isa_name(ks[i].isa)), "%s", line);
        cr_assert(strstr(line, ks[i].layout ? ks[i].layout->name : " rows "), "%s", line);
        const bool runs = woolly_kernel_runs(&ks[i]);
        cr_assert(runs == !strstr(line, " no"), "%s: runs here = %d", line, runs);
        if (ks[i].op == WOOLLY_OP_GEMV || ks[i].op == WOOLLY_OP_GEMM) {
            const woolly_kernel *v = woolly_kernel_default_gemv(ks[i].wtype, -1);
            const bool sel = woolly_kernel_choose(ks[i].op, ks[i].wtype, v->act, v->layout) == &ks[i] ||
                             (ks[i].op == WOOLLY_OP_GEMM &&
                              woolly_kernel_choose_small(ks[i].wtype, v->act, v->layout) == &ks[i]);
            cr_assert(sel == (strstr(line, "selected") != NULL), "%s: selected = %d", line, sel);
        }
    }
    free(out), free(err);
}

Test(info_kernels, takes_no_model)
{
    char *out, *err;
    cr_assert_eq(tu_run_cli("info --kernels model.gguf", &out, &err), 2);
    cr_assert(strstr(err, "--kernels takes no model"), "%s", err);
    free(out), free(err);
    cr_assert_eq(tu_run_cli("info", &out, &err), 2);
    cr_assert(strstr(err, "MODEL.gguf is required"), "%s", err);
    free(out), free(err);
}
