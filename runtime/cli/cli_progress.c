#include "cli_progress.h"

#include <stdio.h>
#include <unistd.h>

#include "cli_common.h"

#define BAR_WIDTH 24

void cli_progress_format(char *buf, size_t cap, int64_t done, int64_t total, double elapsed_s,
                         const char *step_name, int step, int n_steps, const char *unit)
{
    if (total < 1)
        total = 1;
    if (done > total)
        done = total;
    if (done < 0)
        done = 0;
    char bar[BAR_WIDTH + 1];
    const int filled = (int)(done * BAR_WIDTH / total);
    for (int i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    const double rate = elapsed_s > 0 ? (double)done / elapsed_s : 0.0;
    char left[32] = "--:--";
    if (rate > 0) {
        const long s = (long)((double)(total - done) / rate + 0.5);
        if (s >= 3600)
            snprintf(left, sizeof left, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
        else
            snprintf(left, sizeof left, "%ld:%02ld", s / 60, s % 60);
    }
    snprintf(buf, cap, "[%s] %3d%%  %s %d/%d  %.1f %s/s  %s left", bar, (int)(done * 100 / total), step_name,
             step, n_steps, rate, unit, left);
}

void cli_progress_start(cli_progress *p, bool wanted, int64_t total, const char *unit)
{
    p->on = wanted && isatty(fileno(stderr));
    p->t0 = cli_now_s();
    p->total = total;
    p->unit = unit;
}

void cli_progress_update(cli_progress *p, int64_t done, const char *step_name, int step, int n_steps)
{
    if (!p->on)
        return;
    char line[160];
    cli_progress_format(line, sizeof line, done, p->total, cli_now_s() - p->t0, step_name, step, n_steps,
                        p->unit);
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
}

void cli_progress_clear(cli_progress *p)
{
    if (!p->on)
        return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
}
