/* Logits against the references with every ISA level this CPU runs forced (WOOLLY_ISA) and with both KV
 * cache types (F16, Q8_0), through `woolly logits`, on the synthetic models of the other families
 * (qwen2, qwen3, phi3, gemma3; model_logits_check.h). */
#include "model_logits_check.h"

Test(logits_levels_cli, tiny_qwen2_f16)
{
    check_cli_levels(model_named("tiny-qwen2-f16"));
}
Test(logits_levels_cli, tiny_qwen3_f16)
{
    check_cli_levels(model_named("tiny-qwen3-f16"));
}
Test(logits_levels_cli, tiny_qwen3_q4_k_m)
{
    check_cli_levels(model_named("tiny-qwen3-q4_k_m"));
}
Test(logits_levels_cli, tiny_phi3_f16)
{
    check_cli_levels(model_named("tiny-phi3-f16"));
}
Test(logits_levels_cli, tiny_gemma3_f16)
{
    check_cli_levels(model_named("tiny-gemma3-f16"));
}
