/* Logits against the references with every ISA level this CPU runs forced (WOOLLY_ISA) and with both KV
 * cache types (F16, Q8_0), through `woolly logits`, on every model (model_logits_check.h). */
#include "model_logits_check.h"

Test(logits_levels_cli, stories260K)
{
    check_cli_levels(&MODELS[0]);
}
Test(logits_levels_cli, tiny_llama_q4_k_m)
{
    check_cli_levels(&MODELS[1]);
}
Test(logits_levels_cli, tiny_llama_q6_k)
{
    check_cli_levels(&MODELS[2]);
}
Test(logits_levels_cli, tiny_llama_q8_0)
{
    check_cli_levels(&MODELS[3]);
}
Test(logits_levels_cli, tiny_llama_f16)
{
    check_cli_levels(&MODELS[4]);
}
Test(logits_levels_cli, tiny_granite_q4_k_m)
{
    check_cli_levels(&MODELS[5]);
}
