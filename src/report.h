/* Programming errors spry detects (double free, a pointer it never handed
 * out): one line on stderr unless SPRY_VERBOSE=0, then abort() if
 * SPRY_ABORT_ON_ERROR=1; otherwise the call is ignored and the program goes
 * on. No stdio, no malloc: safe inside the allocator. */
#ifndef SPRY_REPORT_H
#define SPRY_REPORT_H

/* "spry: <call>: <problem> 0x<p> (ignored)" */
void spry_report_error(const char *call, const char *problem, const void *p);

#endif
