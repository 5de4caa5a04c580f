/* spry_init and fork handling. */
#include "init.h"
#include "options.h"
#include "heap.h"
#include "arena.h"
#include "purge.h"
#include "stats.h"
#include "types.h"
#include "os.h"
#include "../include/spry.h"
#include <pthread.h>

uint8_t spry_chunk_map[SPRY_CHUNK_MAP_SIZE];   /* .bss: reserved, never touched ahead */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
int spry_cpus = 1;

/* Fork from a multi-threaded parent: every spry lock is taken before the
 * fork and released on both sides, so the child never inherits a lock held
 * by a thread that does not exist there. Order: purge pass, heaps, arena. */
static void fork_prepare(void) {
    spry_purge_fork_prepare();
    spry_heaps_fork_prepare();
    spry_arena_fork_prepare();
}
static void fork_parent(void) {
    spry_arena_fork_parent();
    spry_heaps_fork_parent();
    spry_purge_fork_parent();
}
static void fork_child(void) {
    spry_arena_fork_child();
    spry_heaps_fork_child();
    spry_purge_fork_child();
}

static void init_once_fn(void) {
    spry_options_init();
    spry_cpus = spry_os_cpu_count();
    spry_heaps_init();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void spry_init(void) {
    pthread_once(&init_once, init_once_fn);
}

__attribute__((destructor)) static void spry_at_exit(void) {
    if (spry_option(SPRY_OPT_STATS)) spry_stats_print(2);
}
