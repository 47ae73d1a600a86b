#include <stdio.h>

#include "commands.h"

/* Placeholder until this command is implemented; it fails loudly rather than pretending. */
int woolly_cmd_run(int argc, char **argv)
{
    (void)argc;
    fprintf(stderr, "woolly %s: not implemented yet\n", argv[0]);
    return 1;
}
