/* Foreign pointers; see foreign.h. */
#define _GNU_SOURCE
#include "foreign.h"
#include "alloc_fast.h"
#include "stats.h"
#include "fmt.h"
#include <dlfcn.h>
#include <string.h>
#include <errno.h>

typedef void   (*free_fn)(void *);
typedef size_t (*usable_fn)(void *);

static _Atomic(free_fn) next_free;
static _Atomic(usable_fn) next_usable;

/* dlsym may itself allocate (its error buffer): that lands in spry, fine. */
static free_fn foreign_free_fn(void) {
    free_fn f = atomic_load_explicit(&next_free, memory_order_acquire);
    if (!f) {
        f = (free_fn)dlsym(RTLD_NEXT, "free");
        atomic_store_explicit(&next_free, f, memory_order_release);
    }
    return f;
}

static usable_fn foreign_usable_fn(void) {
    usable_fn f = atomic_load_explicit(&next_usable, memory_order_acquire);
    if (!f) {
        f = (usable_fn)dlsym(RTLD_NEXT, "malloc_usable_size");
        atomic_store_explicit(&next_usable, f, memory_order_release);
    }
    return f;
}

void spry_foreign_free(void *p) {
    spry_stat_add(&spry_stat.foreign_frees, 1);
    free_fn f = foreign_free_fn();
    if (f) f(p);      /* else: nobody to hand it to; leaking beats corrupting */
}

size_t spry_foreign_usable_size(void *p) {
    usable_fn f = foreign_usable_fn();
    return f ? f(p) : 0;
}

void *spry_foreign_realloc(void *p, size_t n) {
    size_t old = spry_foreign_usable_size(p);
    if (old == 0) { errno = ENOMEM; return NULL; }   /* cannot know what to copy */
    void *q = spry_malloc_inline(n);
    if (!q) return NULL;
    memcpy(q, p, old < n ? old : n);
    spry_foreign_free(p);
    return q;
}

void spry_report_invalid(const char *what, const void *p) {
    spry_fmt_t f; spry_fmt_init(&f);
    spry_fmt_str(&f, "spry: ");
    spry_fmt_str(&f, what);
    spry_fmt_str(&f, ": invalid pointer 0x");
    char hex[17]; uintptr_t v = (uintptr_t)p;
    for (int i = 15; i >= 0; i--) { hex[i] = "0123456789abcdef"[v & 15]; v >>= 4; }
    hex[16] = 0;
    spry_fmt_str(&f, hex);
    spry_fmt_str(&f, " (ignored)\n");
    spry_fmt_flush(&f, 2);
}
