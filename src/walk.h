/* The heap walk behind spry_heap_walk (walk.c). */
#ifndef SPRY_WALK_H
#define SPRY_WALK_H

#include <stdbool.h>
#include <stddef.h>

typedef bool (*spry_walk_visit_t)(void *block, size_t size, void *arg);

/* Calls visit(block, usable size, arg) for every live block, heap by heap,
 * then the huge blocks, with no spry lock held; stops after the first call
 * that returns false. Returns how many blocks were visited (that last one
 * included); a NULL visit only counts. */
size_t spry_walk_blocks(spry_walk_visit_t visit, void *arg);

#endif
