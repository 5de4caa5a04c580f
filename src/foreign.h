/* Pointers spry did not allocate (glibc's before spry was loaded, or a
 * second allocator's) go to the allocator that follows spry in the symbol
 * lookup order, found once with dlsym(RTLD_NEXT), when they plausibly are
 * glibc's blocks; other pointers are reported and ignored (foreign.c). */
#ifndef SPRY_FOREIGN_H
#define SPRY_FOREIGN_H

#include <stddef.h>
#include <stdbool.h>

/* True when p plausibly is a glibc block (see foreign.c); reads through
 * the kernel, so a wild pointer faults nowhere. */
bool   spry_foreign_plausible(const void *p);
void   spry_foreign_free(void *p);
size_t spry_foreign_usable_size(void *p);
void  *spry_foreign_realloc(void *p, size_t n);

#endif
