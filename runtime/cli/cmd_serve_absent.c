/* `woolly serve` in a build without the server subsystem (WOOLLY_SERVER=OFF, as in the aarch64 cross
 * build): the command exists and says why it cannot run, instead of being an unknown command. */
#include <stdio.h>

#include "commands.h"

int woolly_cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "woolly serve: this build has no HTTP server (configured with WOOLLY_SERVER=OFF; it needs "
                    "libmicrohttpd and jansson)\n");
    return 1;
}
