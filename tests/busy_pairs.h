/* busy_pairs.h: keeps a thread busy on the block cache's guarded paths
 * (malloc/free pairs of 2,000 B, written), so that purge passes never take
 * its heap for idle and give its caches back all at once: only their
 * scavenging and aging reach them. */
#ifndef SPRY_TEST_BUSY_PAIRS_H
#define SPRY_TEST_BUSY_PAIRS_H

#include "check.h"
#include <spry.h>
#include <string.h>

static inline void busy_pairs(int pairs)
{
    for (int i = 0; i < pairs; i++) {
        void *p = spry_malloc(2000);
        CHECK(p != NULL);
        memset(p, 0x5a, 2000);
        spry_free(p);
    }
}

#endif
