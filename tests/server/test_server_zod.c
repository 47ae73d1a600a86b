/* The official OpenAI client's zod helpers end to end. tests/server/zod_helpers.mjs drives `woolly
 * serve` (stories260K, a tiny model that never writes JSON or a tool call by itself) through
 * zodResponseFormat with client.chat.completions.parse and its stream helper, and zodFunction tools with
 * required and named tool_choice, on several zod schemas and seeds: the helper parses every output with
 * the zod schema (it throws on one that does not validate). parallel_tool_calls too. Needs node and
 * tests/server's packages (npm ci; zod is one of them). */
#include <criterion/criterion.h>

#include "server_harness.h"

#define SLOTS 4

Test(server_zod, the_clients_zod_helpers_parse_every_output)
{
    th_node_checks("zod_helpers.mjs", "zod", "zod-key", SLOTS, "");
}
