/* The standard names: C malloc family, glibc's extensions and __libc_*
 * aliases, and every C++ operator new/delete form. Active when libspry.so is
 * preloaded or linked (or libspry.a linked). The fast paths are inlined here,
 * so `malloc` costs what `spry_malloc` costs. */
#define _GNU_SOURCE
#include "../include/spry.h"
#include "alloc_fast.h"
#include "stats.h"
#include "init.h"
#include <errno.h>
#include <malloc.h>
#include <string.h>
#include <unistd.h>
#include <stdlib.h>
#include "os.h"
#include "mode.h"
#include "debug/entry.h"

#define EXPORT __attribute__((visibility("default")))
#define PAGE   4096u

/* In libspry-debug.so each name goes to the cautious layer first, with the
 * allocating family that its release is checked against (src/debug); in
 * libspry.so `spry_cautious` is 0 and the branch is compiled away. */
static inline __attribute__((always_inline)) void *plain_malloc(size_t n) {
    if (spry_cautious) return spry_debug_alloc(n, 0, SPRY_FAMILY_MALLOC);
    return spry_malloc_inline(n);
}
static inline __attribute__((always_inline)) void plain_free(void *p, enum spry_debug_family family) {
    if (spry_cautious) { spry_debug_free(p, family); return; }
    spry_free_inline(p);
}

EXPORT SPRY_HOT_ENTRY void *malloc(size_t n)             { return plain_malloc(n); }
EXPORT SPRY_HOT_ENTRY void  free(void *p)                { plain_free(p, SPRY_FAMILY_MALLOC); }
EXPORT void  cfree(void *p)               { plain_free(p, SPRY_FAMILY_MALLOC); }
EXPORT void *calloc(size_t c, size_t n)   { return spry_calloc(c, n); }
EXPORT void *realloc(void *p, size_t n)   { return spry_realloc(p, n); }
EXPORT void *reallocarray(void *p, size_t c, size_t n) { return spry_reallocarray(p, c, n); }
EXPORT void *memalign(size_t a, size_t n) { return spry_memalign(a, n); }
EXPORT void *aligned_alloc(size_t a, size_t n) { return spry_aligned_alloc(a, n); }
EXPORT int   posix_memalign(void **out, size_t a, size_t n) { return spry_posix_memalign(out, a, n); }
EXPORT void *valloc(size_t n)             { return spry_memalign(PAGE, n); }
EXPORT void *pvalloc(size_t n) {
    size_t r = (n + PAGE - 1) & ~(size_t)(PAGE - 1);
    if (r < n) { errno = ENOMEM; return NULL; }
    return spry_memalign(PAGE, r ? r : PAGE);
}
EXPORT size_t malloc_usable_size(void *p) { return spry_usable_size(p); }

EXPORT int malloc_trim(size_t pad) { (void)pad; spry_trim(); return 1; }
/* glibc tuning knobs do not apply to spry: accepted, ignored. */
EXPORT int mallopt(int param, int value)  { (void)param; (void)value; return 1; }

EXPORT struct mallinfo2 mallinfo2(void) {
    spry_stats_t s;
    spry_stats_get(&s);
    struct mallinfo2 m;
    memset(&m, 0, sizeof m);
    m.arena = s.mapped;
    m.hblks = 0;
    m.hblkhd = s.huge_in_use;
    m.uordblks = s.in_use;
    m.fordblks = s.committed > s.in_use ? s.committed - s.in_use : 0;
    m.keepcost = 0;
    return m;
}

EXPORT struct mallinfo mallinfo(void) {
    struct mallinfo2 m2 = mallinfo2();
    struct mallinfo m;
    memset(&m, 0, sizeof m);
    m.arena = (int)m2.arena; m.hblkhd = (int)m2.hblkhd;
    m.uordblks = (int)m2.uordblks; m.fordblks = (int)m2.fordblks;
    return m;
}

EXPORT void malloc_stats(void) { spry_stats_print(2); }

/* glibc's internal names, which some programs and libraries call directly. */
EXPORT void *__libc_malloc(size_t n)             { return plain_malloc(n); }
EXPORT void  __libc_free(void *p)                { plain_free(p, SPRY_FAMILY_MALLOC); }
EXPORT void *__libc_calloc(size_t c, size_t n)   { return spry_calloc(c, n); }
EXPORT void *__libc_realloc(void *p, size_t n)   { return spry_realloc(p, n); }
EXPORT void *__libc_memalign(size_t a, size_t n) { return spry_memalign(a, n); }
EXPORT void *__libc_valloc(size_t n)             { return valloc(n); }
EXPORT void *__libc_pvalloc(size_t n)            { return pvalloc(n); }

/* ---- C++ --------------------------------------------------------------
 * Written in C against the Itanium ABI names, so the library needs no
 * libstdc++. A failing operator new calls the program's new_handler, or
 * throws std::bad_alloc through libstdc++'s own thrower (present whenever a
 * C++ program is); weak references keep C programs free of both. */
typedef void (*new_handler_t)(void);
extern new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

/* Returns NULL only for nothrow forms. */
static __attribute__((noinline)) void *new_retry(size_t n, size_t align, bool nothrow,
                                                 enum spry_debug_family family) {
    for (;;) {
        void *p = spry_cautious ? spry_debug_alloc(n, align, family)
                : align ? spry_aligned_alloc(align, n) : spry_malloc(n);
        if (p) return p;
        new_handler_t h = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
        if (!h) {
            if (nothrow) return NULL;
            if (_ZSt17__throw_bad_allocv) _ZSt17__throw_bad_allocv();
            static const char msg[] = "spry: operator new: out of memory\n";
            spry_os_write(2, msg, sizeof msg - 1);
            abort();
        }
        h();
    }
}

static inline void *cxx_new(size_t n, enum spry_debug_family family) {
    void *p = spry_cautious ? spry_debug_alloc(n, 0, family) : spry_malloc_inline(n);
    if (spry_likely(p != NULL)) return p;
    return new_retry(n, 0, false, family);
}
static inline void *cxx_new_nothrow(size_t n, enum spry_debug_family family) {
    void *p = spry_cautious ? spry_debug_alloc(n, 0, family) : spry_malloc_inline(n);
    if (spry_likely(p != NULL)) return p;
    return new_retry(n, 0, true, family);
}
static inline void *cxx_new_aligned(size_t n, size_t a, bool nothrow, enum spry_debug_family family) {
    /* the alignment checks of aligned_alloc come first in both builds */
    void *p = spry_cautious && (a & (a - 1)) == 0 && a ? spry_debug_alloc(n, a, family)
            : spry_aligned_alloc(a, n);
    if (spry_likely(p != NULL)) return p;
    return new_retry(n, a, nothrow, family);
}

EXPORT SPRY_HOT_ENTRY void *_Znwm(size_t n)                          { return cxx_new(n, SPRY_FAMILY_NEW); }
EXPORT SPRY_HOT_ENTRY void *_Znam(size_t n)                          { return cxx_new(n, SPRY_FAMILY_NEW_ARRAY); }
EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const void *t) { (void)t; return cxx_new_nothrow(n, SPRY_FAMILY_NEW); }
EXPORT void *_ZnamRKSt9nothrow_t(size_t n, const void *t) { (void)t; return cxx_new_nothrow(n, SPRY_FAMILY_NEW_ARRAY); }
EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t a) { return cxx_new_aligned(n, a, false, SPRY_FAMILY_NEW); }
EXPORT void *_ZnamSt11align_val_t(size_t n, size_t a) { return cxx_new_aligned(n, a, false, SPRY_FAMILY_NEW_ARRAY); }
EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *t) { (void)t; return cxx_new_aligned(n, a, true, SPRY_FAMILY_NEW); }
EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *t) { (void)t; return cxx_new_aligned(n, a, true, SPRY_FAMILY_NEW_ARRAY); }

EXPORT SPRY_HOT_ENTRY void _ZdlPv(void *p)                            { plain_free(p, SPRY_FAMILY_NEW); }
EXPORT SPRY_HOT_ENTRY void _ZdaPv(void *p)                            { plain_free(p, SPRY_FAMILY_NEW_ARRAY); }
EXPORT SPRY_HOT_ENTRY void _ZdlPvm(void *p, size_t n)                 { (void)n; plain_free(p, SPRY_FAMILY_NEW); }
EXPORT SPRY_HOT_ENTRY void _ZdaPvm(void *p, size_t n)                 { (void)n; plain_free(p, SPRY_FAMILY_NEW_ARRAY); }
EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *t) { (void)t; plain_free(p, SPRY_FAMILY_NEW); }
EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *t) { (void)t; plain_free(p, SPRY_FAMILY_NEW_ARRAY); }
EXPORT void _ZdlPvSt11align_val_t(void *p, size_t a)   { (void)a; plain_free(p, SPRY_FAMILY_NEW); }
EXPORT void _ZdaPvSt11align_val_t(void *p, size_t a)   { (void)a; plain_free(p, SPRY_FAMILY_NEW_ARRAY); }
EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)n; (void)a; plain_free(p, SPRY_FAMILY_NEW); }
EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)n; (void)a; plain_free(p, SPRY_FAMILY_NEW_ARRAY); }
EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t) { (void)a; (void)t; plain_free(p, SPRY_FAMILY_NEW); }
EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t) { (void)a; (void)t; plain_free(p, SPRY_FAMILY_NEW_ARRAY); }
