/* Which library this build is: the fast one, libspry.so (SPRY_CAUTIOUS=0),
 * or the cautious one, libspry-debug.so (1), from the same sources. The
 * build sets SPRY_CAUTIOUS; code tests spry_cautious with a plain `if`, and
 * the compiler drops the dead branch, so the fast library's code is what it
 * would be without the cautious layer (style.md, rule 3: no #if for modes). */
#ifndef SPRY_MODE_H
#define SPRY_MODE_H

#include <stdbool.h>

static const bool spry_cautious = SPRY_CAUTIOUS;

#endif
