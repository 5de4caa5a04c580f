/* A stack capture, inlined into the entry points that record one (entry.c):
 * unw_backtrace then runs in the entry point's own frame, so that the
 * capture's functions are no frames to unwind and leave out. Unwinding is
 * most of a capture's cost, about the same for each frame.
 *
 *   dbg_stack_ask()       frames to ask for: DBG_FRAMES and the own frames
 *                         seen leading a stack so far (stack.c)
 *   unw_backtrace         here, in the caller's frame
 *   dbg_stack_own()       the own frames leading it; -1 when the stack came
 *                         back full with more of them than expected (a
 *                         deeper path): asked again, so none is cut short
 *   dbg_stack_intern()    the table's id for the rest */
#ifndef SPRY_DEBUG_CAPTURE_H
#define SPRY_DEBUG_CAPTURE_H

#include "debug.h"
#include <libunwind.h>
#include <pthread.h>

#define DBG_OWN_MAX 16      /* own frames a capture ever asks room for */

int dbg_stack_ask(void);
int dbg_stack_own(void *const *pc, int n, int asked);
uint32_t dbg_stack_intern(void *const *pc, int depth);

/* The calling thread's stack (the allocator's own frames left out), as an
 * id of the table; 0 when it cannot be captured. */
static inline __attribute__((always_inline)) uint32_t dbg_stack_capture(void) {
    if (dbg_inside) return 0;        /* inside the unwinder or a report */
    void *pc[DBG_FRAMES + DBG_OWN_MAX];
    int asked, n, skip, cancel;
    /* libunwind checks addresses with system calls that are cancellation
     * points: a thread with a cancel pending ended inside malloc or free
     * (a review's test, 1 run in 8) */
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    do {
        asked = dbg_stack_ask();
        dbg_inside++;
        n = unw_backtrace(pc, asked);
        dbg_inside--;
    } while ((skip = dbg_stack_own(pc, n, asked)) < 0);
    pthread_setcancelstate(cancel, NULL);
    n -= skip;
    if (n > DBG_FRAMES) n = DBG_FRAMES;
    return n > 0 ? dbg_stack_intern(pc + skip, n) : 0;
}

#endif
