/* libFuzzer target for the chat template interpreter (runtime/chat): a model file's
 * tokenizer.chat_template is text from whoever made the file, and the server renders it on every request
 * with the messages its clients send. An input is a template, optionally followed by a NUL byte and the
 * JSON context to render it with (else a context like a server's: a system prompt, turns of each role,
 * a tool call and its result, a tool list). Parsing and rendering either succeed or fail with a message;
 * the caps on nesting, recursion, steps and output size keep every input bounded in time and memory
 * (a hang shows as libFuzzer's timeout). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"

static const char DEFAULT_CONTEXT[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"You are terse.\"},"
    "{\"role\": \"user\", \"content\": \"Weather in Oslo?\"},"
    "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\", \"id\": \"c1\","
    " \"function\": {\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"-3 C\"},"
    "{\"role\": \"assistant\", \"content\": \"Cold: -3 C.\"},"
    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"And \\u00e9t\\u00e9?\"}]}],"
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"weather\", \"description\": \"now\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}},"
    " \"required\": [\"city\"]}}}],"
    "\"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_jinja: invariant violated: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    const size_t tlen = nul ? (size_t)(nul - data) : size;
    char *context = NULL;
    if (nul) { /* the context: NUL-terminated for the renderer */
        const size_t clen = size - tlen - 1;
        context = malloc(clen + 1);
        if (!context)
            return 0;
        memcpy(context, nul + 1, clen);
        context[clen] = 0;
    }
    char err[256] = {0};
    jinja_template *t = jinja_parse((const char *)data, tlen, err, sizeof err);
    if (!t) {
        check(err[0] != 0, "a template refused without a message");
        free(context);
        return 0;
    }
    size_t len = 0;
    err[0] = 0;
    char *out = jinja_render(t, context ? context : DEFAULT_CONTEXT, &len, err, sizeof err);
    if (out) {
        check(out[len] == 0, "the text is not NUL-terminated at its length");
        free(out);
    } else {
        check(err[0] != 0, "a render failed without a message");
    }
    jinja_free(t);
    free(context);
    return 0;
}
