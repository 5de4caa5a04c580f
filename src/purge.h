/* Giving memory back. Free spans and chunks are purged (MADV_DONTNEED) once
 * they have stayed free for the purge delay, by a background thread started
 * when something becomes free, so an idle program's RSS falls even if it
 * never calls the allocator again. The thread leaves after a few purge delays
 * with nothing to do (an idle program is as many threads as it made) and
 * comes back at the next free. With SPRY_PURGE_THREAD=0 (or if the thread
 * cannot start) allocator slow paths do the same work when it is due. */
#ifndef SPRY_PURGE_H
#define SPRY_PURGE_H

#include <stdbool.h>

/* Something became free: make sure a purge pass will come. Safe anywhere:
 * it never starts the thread itself. */
void spry_purge_notify(void);
/* Starts the purge thread if a notify asked for it. Call only where no
 * allocator operation of this thread is under way (it allocates). */
void spry_purge_start_point(void);
/* The same at the end of a free, but for a free the dynamic loader made
 * (`caller`: free's return address): it frees a thread's TLS at a join
 * with glibc's stack-cache lock held, which pthread_create takes (a review:
 * a fork child's join hung for good). The thread then starts at the next
 * start point. Called by the slow paths free jumps to (alloc_fast.h: tail
 * calls, so that their return address is free's). */
void spry_purge_free_point(const void *caller);
/* Before a free gives a huge block's memory back: notify, and start the
 * thread now if it is not running. Started after, glibc's allocation for
 * the new thread could land where the block was (a fresh heap's first
 * segment, carved from the chunks just released), and the program's second
 * free of the block then freed that live allocation, unreported (a review).
 * Before, the block is still allocated, and the second free finds no block
 * and is reported. The thread then runs (or cannot start, or the caller is
 * the loader), so no start point is needed after the free. */
void spry_purge_free_point_early(const void *caller);
/* Slow-path hook: runs a purge pass inline when no thread does and one is due. */
void spry_purge_poll(void);
/* True while purge passes may collect and scavenge owners' caches (a purge
 * thread, the membarrier call). */
bool spry_purge_collects(void);
/* Everything free goes back to the kernel now. */
void spry_purge_all(void);
/* A heap went over its free-memory budget: marks it and wakes the purge
 * thread, which trims it at once. False when no thread runs (the caller
 * trims it itself). */
struct spry_heap;
bool spry_purge_urgent(struct spry_heap *heap);
/* `heap` took fresh memory (segment.c): a hurried look (guard.h,
 * spry_heaps_collect_hurried), made by the caller where it can, else by
 * the purge thread, collects the caches of other heaps whose owners are
 * blocked now, not after several purge delays, so that what they free is
 * lent to the heaps that grow. At most one every 250 us; none where passes
 * do not collect (spry_purge_collects). */
void spry_purge_hurry(struct spry_heap *heap);
void spry_purge_fork_prepare(void);
void spry_purge_fork_parent(void);
void spry_purge_fork_child(void);

#endif
