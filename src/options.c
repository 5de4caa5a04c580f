/* The one table of options. Each is read from its environment variable the
 * first time spry initialises; values are plain decimal integers, but for
 * path options, whose text is copied (the program may change its
 * environment later) and whose value is then 1. A bad value keeps the
 * default and says so on stderr. */
#define _GNU_SOURCE
#include "options.h"
#include "os.h"
#include "fmt.h"
#include <stdlib.h>
#include <string.h>

typedef struct option_desc {
    const char *name;       /* environment variable */
    long        def;
    long        min, max;
    const char *doc;
    char       *text;       /* a path option's copy of its value; NULL for integers */
} option_desc_t;

static char stats_file[SPRY_OPTION_TEXT_MAX], debug_log[SPRY_OPTION_TEXT_MAX];

static const option_desc_t option_table[SPRY_OPT_COUNT] = {
    [SPRY_OPT_PURGE_DELAY_MS] = { "SPRY_PURGE_DELAY_MS", 250, 0, 3600000,
        "free memory older than this goes back to the kernel (MADV_DONTNEED)" },
    [SPRY_OPT_PURGE_THREAD]   = { "SPRY_PURGE_THREAD", 1, 0, 1,
        "1: a background thread returns memory of idle programs; 0: only on allocator calls" },
    [SPRY_OPT_STATS]          = { "SPRY_STATS", 0, 0, 2,
        "1: print statistics at exit (to stderr or SPRY_STATS_FILE); 2: the same as one line of JSON" },
    [SPRY_OPT_THP]            = { "SPRY_THP", 0, 0, 1,
        "1: allow transparent huge pages for huge blocks (may raise RSS)" },
    [SPRY_OPT_ARENA_MB]       = { "SPRY_ARENA_MB", 64, 4, 1024,
        "size of the first address-space reservation; later ones double up to 1 GiB" },
    [SPRY_OPT_VERBOSE]        = { "SPRY_VERBOSE", 1, 0, 1,
        "1: report programming errors (double free, invalid pointer) and bad options on stderr; 0: silent" },
    [SPRY_OPT_ABORT_ON_ERROR] = { "SPRY_ABORT_ON_ERROR", 0, 0, 1,
        "1: abort() on a double free or invalid pointer instead of ignoring it (for CI)" },
    [SPRY_OPT_STATS_FILE]     = { "SPRY_STATS_FILE", 0, 0, 1,
        "path: SPRY_STATS appends there (created 0600, never through a symbolic link), not to stderr",
        stats_file },
    /* read by the cautious build (libspry-debug.so) only */
    [SPRY_OPT_DEBUG_QUARANTINE_MB] = { "SPRY_DEBUG_QUARANTINE_MB", 64, 0, 65536,
        "cautious build: freed blocks held back (and checked for writes after free) up to this many MiB" },
    [SPRY_OPT_DEBUG_LOG]      = { "SPRY_DEBUG_LOG", 0, 0, 1,
        "cautious build: append reports to this file (%p: the process id) instead of stderr", debug_log },
    [SPRY_OPT_DEBUG_LEAKS]    = { "SPRY_DEBUG_LEAKS", 1, 0, 1,
        "cautious build: 1: list the blocks still allocated at exit (leaks); 0: do not" },
};

long spry_options[SPRY_OPT_COUNT];

static bool option_parse(const char *s, long *out) {
    if (!s || !*s) return false;
    long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        if (v > 100000000L) return false;
        v = v * 10 + (*s - '0');
    }
    *out = v;
    return true;
}

void spry_options_init(void) {
    /* secure_getenv: in setuid/setgid programs the environment belongs to a
     * less trusted user, so options are ignored there (glibc does the same
     * for MALLOC_*). It neither allocates nor locks. */
    const char *bad[SPRY_OPT_COUNT] = { 0 };
    for (int i = 0; i < SPRY_OPT_COUNT; i++) {
        const option_desc_t *d = &option_table[i];
        long v = d->def, parsed;
        const char *s = secure_getenv(d->name);
        if (s && d->text && *s && strlen(s) < SPRY_OPTION_TEXT_MAX) {
            strcpy(d->text, s);
            v = 1;
        } else if (s && !d->text && option_parse(s, &parsed) && parsed >= d->min && parsed <= d->max) {
            v = parsed;
        } else if (s) {
            bad[i] = s;
        }
        spry_options[i] = v;
    }
    if (!spry_option(SPRY_OPT_VERBOSE)) return;
    for (int i = 0; i < SPRY_OPT_COUNT; i++) {
        if (!bad[i]) continue;
        const option_desc_t *d = &option_table[i];
        spry_fmt_t f; spry_fmt_init(&f);
        spry_fmt_str(&f, "spry: ignoring "); spry_fmt_str(&f, d->name);
        spry_fmt_str(&f, "=");
        /* the value's first 200 bytes: a longer one filled the line's
         * buffer and the message lost its end and newline (a review) */
        spry_fmt_strn(&f, bad[i], 200);
        if (strlen(bad[i]) > 200) spry_fmt_str(&f, "...");
        if (d->text) {
            spry_fmt_str(&f, *bad[i] ? " (want a path shorter than 4096 bytes)\n" : " (want a path, not nothing)\n");
        } else {
            spry_fmt_str(&f, " (want an integer in ");
            spry_fmt_long(&f, d->min); spry_fmt_str(&f, "..");
            spry_fmt_long(&f, d->max); spry_fmt_str(&f, ")\n");
        }
        spry_fmt_flush(&f, 2);
    }
}

long spry_options_lookup(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < SPRY_OPT_COUNT; i++) {
        const char *n = option_table[i].name;
        if (strcmp(name, n) == 0 || strcmp(name, n + 5) == 0) return spry_options[i];
    }
    return -1;
}

const char *spry_option_text(spry_option_t o) {
    return spry_options[o] ? option_table[o].text : NULL;
}

bool spry_option_describe(spry_option_t o, const char **name, const char **doc) {
    *name = option_table[o].name;
    *doc = option_table[o].doc;
    return option_table[o].text != NULL;
}
