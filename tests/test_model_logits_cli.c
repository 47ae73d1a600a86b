/* Logits against the references with the reference kernels (WOOLLY_ISA=scalar), through the
 * `woolly logits` command, on every model (model_logits_check.h). */
#include "model_logits_check.h"

Test(logits_scalar_cli, stories260K)
{
    check_cli_scalar(&MODELS[0]);
}
Test(logits_scalar_cli, tiny_llama_q4_k_m)
{
    check_cli_scalar(&MODELS[1]);
}
Test(logits_scalar_cli, tiny_llama_q6_k)
{
    check_cli_scalar(&MODELS[2]);
}
Test(logits_scalar_cli, tiny_llama_q8_0)
{
    check_cli_scalar(&MODELS[3]);
}
Test(logits_scalar_cli, tiny_llama_f16)
{
    check_cli_scalar(&MODELS[4]);
}
Test(logits_scalar_cli, tiny_granite_q4_k_m)
{
    check_cli_scalar(&MODELS[5]);
}
