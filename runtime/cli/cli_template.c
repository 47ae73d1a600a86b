#include "cli_template.h"

#include <stdio.h>
#include <stdlib.h>

#include "chat.h"

void cli_add_template_flags(cli_table *t, cli_template_opts *o, const char *name_help)
{
    *o = (cli_template_opts){0};
    cli_add(t, (cli_flag){NULL, "--chat-template", CLI_ENUM, &o->name, 0, 0, woolly_chat_family_choices(),
                          name_help, NULL});
    cli_add(t, (cli_flag){NULL, "--chat-template-file", CLI_STR, &o->file, 0, 0, "FILE",
                          "a Jinja chat template to render instead of the model's tokenizer.chat_template",
                          NULL});
}

bool cli_template_finish(const char *cmd, const cli_template_opts *o, int *forced, char **text)
{
    *forced = o->name ? woolly_chat_family_from_name(o->name) : -1;
    *text = NULL;
    if (o->name && o->file) {
        fprintf(stderr, "woolly %s: --chat-template and --chat-template-file exclude each other: give one\n",
                cmd);
        return false;
    }
    if (!o->file)
        return true;
    size_t len;
    if (!(*text = cli_read_file(cmd, o->file, &len)))
        return false;
    if (len == 0) {
        fprintf(stderr, "woolly %s: --chat-template-file '%s' is empty\n", cmd, o->file);
        free(*text);
        *text = NULL;
        return false;
    }
    return true;
}
