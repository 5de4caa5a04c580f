/* Text output without stdio or malloc: a fixed buffer flushed with write(2).
 * Used for statistics and error messages. */
#ifndef SPRY_FMT_H
#define SPRY_FMT_H

#include <stddef.h>
#include "os.h"

typedef struct spry_fmt { char buf[512]; size_t len; } spry_fmt_t;

static inline void spry_fmt_init(spry_fmt_t *f) { f->len = 0; }

/* At most `max` bytes of s. */
static inline void spry_fmt_strn(spry_fmt_t *f, const char *s, size_t max) {
    while (*s && max-- && f->len < sizeof f->buf) f->buf[f->len++] = *s++;
}

static inline void spry_fmt_str(spry_fmt_t *f, const char *s) {
    spry_fmt_strn(f, s, (size_t)-1);
}

static inline void spry_fmt_ulong(spry_fmt_t *f, unsigned long v) {
    char tmp[24]; int n = 0;
    do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (n > 0 && f->len < sizeof f->buf) f->buf[f->len++] = tmp[--n];
}

static inline void spry_fmt_long(spry_fmt_t *f, long v) {
    if (v < 0) { spry_fmt_str(f, "-"); spry_fmt_ulong(f, (unsigned long)-v); }
    else spry_fmt_ulong(f, (unsigned long)v);
}

static inline void spry_fmt_flush(spry_fmt_t *f, int fd) {
    spry_os_write(fd, f->buf, f->len);
    f->len = 0;
}

#endif
