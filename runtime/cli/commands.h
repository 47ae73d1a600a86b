/* The `woolly` subcommands. Each lives in its own file cmd_<name>.c, takes the arguments after its
 * name (argv[0] is the subcommand name) and returns the process exit status. */
#ifndef WOOLLY_CLI_COMMANDS_H
#define WOOLLY_CLI_COMMANDS_H

#define WOOLLY_COMMANDS(X)                                                                   \
    X(info, "show a model's metadata, tensors and size")                                     \
    X(quantize, "convert a model's matrices to Q4_K_M, Q5_K_M, IQ4_XS, Q4_0, Q8_0, ...")      \
    X(synth, "write a random-weight model of a given shape")                                 \
    X(tokenize, "print the token ids of a text")                                             \
    X(detokenize, "print the text of token ids")                                             \
    X(run, "generate text from a prompt")                                                    \
    X(chat, "interactive chat using the model's chat template")                              \
    X(logits, "write the logits of every position of a token sequence")                      \
    X(bench, "measure prompt processing and generation speed")                               \
    X(tune, "measure the kernels on this machine and write the profile runs use")            \
    X(perplexity, "perplexity of a text, and KL divergence against a base run")              \
    X(imatrix, "the importance matrix of a text, for quantizing with it")                    \
    X(serve, "serve the model over HTTP with the OpenAI API")

#define WOOLLY_DECLARE_COMMAND(name, help) int woolly_cmd_##name(int argc, char **argv);
WOOLLY_COMMANDS(WOOLLY_DECLARE_COMMAND)
#undef WOOLLY_DECLARE_COMMAND

#endif
