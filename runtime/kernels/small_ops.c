#include "small_ops.h"

#include "registry.h"

woolly_small_ops woolly_small_ops_choose(void)
{
    const woolly_kernel *s = woolly_kernel_choose_ops(WOOLLY_OP_SWIGLU, -1);
    const woolly_kernel *r = woolly_kernel_choose_ops(WOOLLY_OP_RMSNORM, -1);
    const woolly_kernel *g = woolly_kernel_choose_ops(WOOLLY_OP_GEGLU, -1);
    woolly_small_ops o = {0};
    if (s)
        o.swiglu = s->swiglu, o.swiglu_name = s->name;
    if (r)
        o.rmsnorm = r->rmsnorm, o.rmsnorm_name = r->name;
    if (g)
        o.geglu = g->geglu, o.geglu_name = g->name;
    return o;
}
