/* Error reports; see report.h. */
#include "report.h"
#include "options.h"
#include "stats.h"
#include "fmt.h"
#include "init.h"
#include <stdint.h>
#include <stdlib.h>

void spry_report_error(const char *call, const char *problem, const void *p) {
    spry_init();                  /* the options, if nothing else ran yet */
    spry_stat_add(&spry_stat.errors, 1);
    bool fatal = spry_option(SPRY_OPT_ABORT_ON_ERROR) != 0;
    if (spry_option(SPRY_OPT_VERBOSE) || fatal) {
        spry_fmt_t f; spry_fmt_init(&f);
        spry_fmt_str(&f, "spry: ");
        spry_fmt_str(&f, call);
        spry_fmt_str(&f, ": ");
        spry_fmt_str(&f, problem);
        spry_fmt_str(&f, " 0x");
        char hex[17]; uintptr_t v = (uintptr_t)p;
        for (int i = 15; i >= 0; i--) { hex[i] = "0123456789abcdef"[v & 15]; v >>= 4; }
        hex[16] = 0;
        spry_fmt_str(&f, hex);
        spry_fmt_str(&f, fatal ? " (aborting: SPRY_ABORT_ON_ERROR=1)\n" : " (ignored)\n");
        spry_fmt_flush(&f, 2);
    }
    if (fatal) abort();
}
