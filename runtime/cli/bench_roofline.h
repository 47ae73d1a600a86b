/* `woolly bench --roofline`: the work a token costs (from the model's tensor table) and this machine's
 * limits (tune/machine_limits.h), so that each figure reads as a share of what the machine allows.
 *
 *   decode (tgN)   every matrix is streamed once per token, the output matrix included, and so is the
 *                  KV cache of the positions before it (depth + half the test's tokens on average):
 *                  bytes per token x tokens/s, against the DRAM read bandwidth; of a mixture of
 *                  experts, only the k experts a token's router chose in each layer are read: the
 *                  attention's and other shared matrices plus k/n of the experts' bytes (the active
 *                  bytes), so that the limit is active bytes / bandwidth;
 *   prefill (ppN)  rows x cols multiply-adds per token for every layer matrix (k of a layer's n
 *                  experts), plus the output matrix's
 *                  once per prompt (only the last token's logits are computed), x tokens/s, against the
 *                  int8 multiply-add rate of the instruction the active ISA level's kernels use
 *                  (of BF16 weights, the BF16 dot product's rate where the level has one, else the
 *                  F32 FMA's; of F16 and F32 weights, the F32 FMA's).
 * Prefill's attention (float work that grows with the depth) and the small ops are not counted: the
 * figure is the matrices' share, a lower bound on the machine's use. */
#ifndef WOOLLY_CLI_BENCH_ROOFLINE_H
#define WOOLLY_CLI_BENCH_ROOFLINE_H

#include "bench_report.h"

/* Fills r->bytes_per_token, r->kv_bytes_per_position (for r->kv_type), r->kv_layers, r->macs_layers,
 * r->macs_output, for sliding-window attention r->kv_sliding_layers and r->kv_window, and, for a mixture
 * of experts, r->n_expert, r->n_expert_used and r->expert_bytes from the GGUF file at r->model_path.
 * Returns 0, or -1 after a message. */
int bench_work_per_token(const char *cmd, bench_run *r);

/* Measures the limits with `threads` threads (a second or two) and folds them into *best: each limit
 * the best of the samples so far, its lowest kept beside it. Zero *best before the first sample.
 * Returns 0, or -1 after a message. */
int bench_sample_roof(const char *cmd, int threads, bench_roof *best);

/* Settles r->prompt_rate once the level's limits are known: BF16 weights' prompts run on the level's BF16
 * dot product where it has one; where it has none (the avx2 level, an AVX-512 CPU without avx512bf16) their
 * kernels widen the weights to F32 and multiply-add with the FMA, whose rate is then their limit. */
void bench_settle_prompt_rate(bench_run *r, const bench_roof *roof);

/* Sets t->roof, t->work_per_token, t->work_rate and t->limit from its mean tokens/s. */
void bench_apply_roof(const bench_run *r, const bench_roof *roof, bench_test *t);

#endif
