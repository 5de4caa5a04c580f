/* Live blocks grouped by allocation stack (leaks.c). */
#ifndef SPRY_DEBUG_LEAKS_H
#define SPRY_DEBUG_LEAKS_H

#include "debug.h"

/* Reports the live blocks allocated at or after sequence number `since`
 * (not those marked ignored), grouped by stack, biggest first, each line
 * headed `what` ("LEAK"); `leaks`: leave out what the C library and the
 * loader keep. Returns how many blocks were listed. */
size_t dbg_report_groups(uint64_t since, const char *what, bool leaks);

#endif
