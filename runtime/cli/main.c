#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "woolly.h"

typedef struct {
    const char *name;
    const char *help;
    int (*fn)(int, char **);
} command;

#define WOOLLY_COMMAND_ENTRY(name, help) {#name, help, woolly_cmd_##name},
static const command COMMANDS[] = {WOOLLY_COMMANDS(WOOLLY_COMMAND_ENTRY)};
#undef WOOLLY_COMMAND_ENTRY

static void usage(FILE *f)
{
    fprintf(f, "woolly %s: CPU inference for GGUF language models\n\nusage: woolly COMMAND [ARGS]\n\n",
            woolly_version());
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        fprintf(f, "  %-11s %s\n", COMMANDS[i].name, COMMANDS[i].help);
    fprintf(f, "\n`woolly COMMAND --help` describes a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("woolly %s\n", woolly_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!strcmp(argv[1], COMMANDS[i].name))
            return COMMANDS[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "woolly: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
