/* libFuzzer target for what the loader reads of a model's metadata before it trusts a tensor: the
 * architecture tables (runtime/model/arch.c and the table files in arch/). An input that parses as
 * GGUF either has its hyperparameters refused with a message, or gives a configuration the forward pass
 * can size its buffers by (the invariants below); then every tensor the table knows is shape-checked,
 * which again either passes or fails with a message. Catches a new family's keys read without a range, a default that
 * divides by zero, or a size computed past int32. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "gguf.h"
#include "kernels.h"

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_arch: invariant violated: %s\n", what);
        abort();
    }
}

static void check_config(const woolly_config *c)
{
    check(c->arch != NULL, "no architecture");
    check(c->n_embd >= 1 && c->n_layer >= 1 && c->n_ff >= 1, "a size below 1");
    check(c->n_head >= 1 && c->n_head_kv >= 1 && c->n_head_kv <= c->n_head, "heads out of range");
    check(c->n_head % c->n_head_kv == 0, "query heads not shared evenly");
    check(c->head_dim >= 1 && c->head_dim <= WOOLLY_MAX_HEAD_DIM, "head dimension out of range");
    check(c->n_rot >= 2 && c->n_rot <= c->head_dim && c->n_rot % 2 == 0, "RoPE dimensions out of range");
    check(c->rope_scale > 0 && c->rope_base > 0, "RoPE base or scale not positive");
    check(c->n_swa >= 0 && c->swa_pattern >= 0, "negative sliding window");
    for (int32_t l = 0; l < c->n_layer && l < 64; l++) {
        const int32_t w = woolly_layer_window(c, l);
        check(w == 0 || w == c->n_swa, "a layer's window is neither none nor the model's");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    woolly_error err = {{0}};
    gguf_file *g = gguf_parse(data, size, &err);
    if (!g)
        return 0;
    woolly_config c;
    memset(&c, 0, sizeof c);
    if (woolly_arch_read_config(g, "fuzz", &c, &err) != 0) {
        check(err.msg[0] != 0, "hyperparameters refused without a message");
        gguf_close(g);
        return 0;
    }
    check_config(&c);
    c.n_vocab = 1 << 16; /* the embedding's rows give it when a model loads */
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        int layer = -1;
        const woolly_arch_tensor *t = woolly_arch_match(c.arch, g->tensors[i].name, &layer);
        if (!t)
            continue;
        check(t->per_block ? layer >= 0 : layer == -1, "a block's tensor without a block, or the reverse");
        woolly_error serr = {{0}};
        if (woolly_arch_check_shape(t, &c, &g->tensors[i], "fuzz", &serr) != 0)
            check(serr.msg[0] != 0, "a shape refused without a message");
    }
    gguf_close(g);
    return 0;
}
