/* spry's cautious mode: libspry-debug.so, the same allocator built with
 * checks on every block (guards, quarantine of freed blocks, stacks,
 * leak report at exit). Preload it (LD_PRELOAD=libspry-debug.so) or link
 * it (-lspry-debug); see README.md, "Cautious mode".
 *
 * These functions exist in libspry-debug.so only, except spry_heap_walk,
 * which both libraries export. Reports go to stderr, or to the file named
 * by SPRY_DEBUG_LOG. */
#ifndef SPRY_DEBUG_H
#define SPRY_DEBUG_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Checks every live block's guards and header and every block in the
 * quarantine for writes after free; reports each damaged block once (its
 * guards are then repaired). Returns the number of errors found. */
size_t   spry_debug_scan(void);

/* The block p (a live block of this library) is an expected leak: the exit
 * report leaves it out. */
void     spry_debug_ignore(void *p);

/* Raises SIGTRAP in the thread making allocation number `sequence` (as the
 * reports number blocks: "block #N"); 0 turns it off. */
void     spry_debug_break_on(uint64_t sequence);

/* The sequence number the next allocation will get: a mark for
 * spry_debug_report_since. */
uint64_t spry_debug_mark(void);

/* Reports the blocks allocated since `mark` that are still live, grouped by
 * allocation stack, biggest first (a diff of two states of the heap).
 * Returns how many blocks there are. */
size_t   spry_debug_report_since(uint64_t mark);

/* Calls visit(block, size, arg) for each live block (the size asked for),
 * until visit returns false; returns the number of blocks visited. Blocks
 * allocated or freed meanwhile by other threads may be missed or seen. */
size_t   spry_heap_walk(bool (*visit)(void *block, size_t size, void *arg), void *arg);

#ifdef __cplusplus
}
#endif
#endif /* SPRY_DEBUG_H */
