/* spry_init and fork handling. */
#include "init.h"
#include "options.h"
#include "heap.h"
#include "arena.h"
#include "purge.h"
#include "huge.h"
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
 * by a thread that does not exist there. Order: purge pass, heaps, huge
 * blocks, arena, the statistics' peak table.
 * From the moment all are held until the parent or child handler runs, the
 * forking thread may still allocate (atfork handlers registered before
 * spry's run then): see spry_fork_owner in lock.h. */
static void fork_prepare(void) {
    spry_purge_fork_prepare();
    spry_heaps_fork_prepare();
    spry_huge_fork_prepare();
    spry_arena_fork_prepare();
    spry_stats_fork_prepare();
    atomic_store_explicit(&spry_fork_owner, (uintptr_t)__builtin_thread_pointer(), memory_order_relaxed);
}
static void fork_parent(void) {
    atomic_store_explicit(&spry_fork_owner, 0, memory_order_relaxed);
    spry_stats_fork_parent();
    spry_arena_fork_parent();
    spry_huge_fork_parent();
    spry_heaps_fork_parent();
    spry_purge_fork_parent();
}
static void fork_child(void) {
    atomic_store_explicit(&spry_fork_owner, 0, memory_order_relaxed);
    /* purge state first: adopting heaps frees memory and asks for a pass */
    spry_stats_fork_child();
    spry_purge_fork_child();
    spry_huge_fork_child();
    spry_arena_fork_child();
    spry_heaps_fork_child();
}

static void init_once_fn(void) {
    spry_options_init();
    spry_cpus = spry_os_cpu_count();
    spry_os_find_loader();
    spry_heaps_init();
    /* for the purge thread's collections: at load the process has one
     * thread as a rule, and registering is then cheap (os.c) */
    if (spry_option(SPRY_OPT_PURGE_THREAD)) spry_os_fence_prepare_early();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void spry_init(void) {
    pthread_once(&init_once, init_once_fn);
}

/* Initialise at load time too, not only at the first malloc: spry's fork
 * handlers are then registered before those of most libraries, and a first
 * malloc inside another library's fork handler never has to register them
 * (glibc holds its handler list's lock while it runs handlers). */
__attribute__((constructor(101))) static void spry_at_load(void) {
    spry_init();
}

__attribute__((destructor)) static void spry_at_exit(void) {
    if (spry_option(SPRY_OPT_STATS)) spry_stats_at_exit();
}
