/* spry's options: one table (options.c), read once from SPRY_* environment
 * variables. */
#ifndef SPRY_OPTIONS_H
#define SPRY_OPTIONS_H

#include <stdbool.h>

typedef enum spry_option {
    SPRY_OPT_PURGE_DELAY_MS,
    SPRY_OPT_PURGE_THREAD,
    SPRY_OPT_STATS,
    SPRY_OPT_THP,
    SPRY_OPT_ARENA_MB,
    SPRY_OPT_VERBOSE,
    SPRY_OPT_ABORT_ON_ERROR,
    SPRY_OPT_STATS_FILE,
    SPRY_OPT_DEBUG_QUARANTINE_MB,
    SPRY_OPT_DEBUG_LOG,
    SPRY_OPT_DEBUG_LEAKS,
    SPRY_OPT_COUNT
} spry_option_t;

/* Value in force; options_init must have run (spry_init does it). */
extern long spry_options[SPRY_OPT_COUNT];
#define spry_option(o) (spry_options[(o)])

void spry_options_init(void);
long spry_options_lookup(const char *name);
/* A path option's text, or NULL when it is not set (or not a path option). */
#define SPRY_OPTION_TEXT_MAX 4096
const char *spry_option_text(spry_option_t o);
/* An option's variable name and one-line doc (the stats printer); true for
 * a path option. */
bool spry_option_describe(spry_option_t o, const char **name, const char **doc);

#endif
