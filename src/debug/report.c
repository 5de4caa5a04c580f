/* Reports of the cautious layer; see report.h. */
#define _GNU_SOURCE
#include "report.h"
#include "../lock.h"
#include "../options.h"
#include "../stats.h"
#include "../os.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static spry_lock_t report_lock = SPRY_LOCK_INIT;
static char out_buf[8192];
static size_t out_len;
static int log_fd = -1;              /* report lock */

/* SPRY_DEBUG_LOG with "%p" replaced by the process id. Appended to, never
 * truncated; O_NOFOLLOW: a link planted under the name is not followed to
 * another file. stderr when it cannot be opened (said once). */
static int log_open(void) {
    const char *name = spry_option_text(SPRY_OPT_DEBUG_LOG);
    if (!name) return 2;
    char path[SPRY_OPTION_TEXT_MAX + 32];
    size_t n = 0;
    for (const char *s = name; *s && n < sizeof path - 24; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            char num[24];
            int k = 0;
            for (unsigned long pid = (unsigned long)getpid(); pid; pid /= 10) num[k++] = (char)('0' + pid % 10);
            while (k) path[n++] = num[--k];
            s++;
        } else {
            path[n++] = *s;
        }
    }
    path[n] = 0;
    /* a name cut short would be another file: stderr instead */
    int fd = n < sizeof path - 24 ? spry_os_open_append(path) : -1;
    if (fd >= 0) return fd;
    const char *why = n < sizeof path - 24 ? spry_os_open_error(errno) : "name too long";
    static const char msg[] = "spry-debug: cannot open SPRY_DEBUG_LOG (";
    static const char tail[] = "); reporting on stderr\n";
    spry_os_write(2, msg, sizeof msg - 1);
    spry_os_write(2, why, strlen(why));
    spry_os_write(2, tail, sizeof tail - 1);
    return 2;
}

/* The log, opened at the first thing to say: a log per process made every
 * silent one leave an empty file (a review). */
static int log_get(void) {
    if (log_fd < 0) log_fd = log_open();
    return log_fd;
}

static void out_flush(void) {
    if (out_len == 0) return;
    spry_os_write(log_get(), out_buf, out_len);
    out_len = 0;
}

void dbg_out_str(const char *s) {
    for (; *s; s++) {
        if (out_len == sizeof out_buf) out_flush();
        out_buf[out_len++] = *s;
    }
}

void dbg_out_dec(unsigned long v) {
    char tmp[24];
    int n = 0;
    do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    char s[24];
    int k = 0;
    while (n) s[k++] = tmp[--n];
    s[k] = 0;
    dbg_out_str(s);
}

void dbg_out_hex(uintptr_t v) {
    char s[19] = "0x";
    int n = 2;
    int shift = 60;
    while (shift > 0 && !((v >> shift) & 15)) shift -= 4;
    for (; shift >= 0; shift -= 4) s[n++] = "0123456789abcdef"[(v >> shift) & 15];
    s[n] = 0;
    dbg_out_str(s);
}

void dbg_out_head(void) {
    dbg_out_str("spry-debug[");
    dbg_out_dec((unsigned long)getpid());
    dbg_out_str("]: ");
}

/* The calling thread's errno as the report found it: free and the other
 * calls that report leave it so (the symbol lookups' libdwfl left EINVAL
 * at a process's first report, the log's open its error: a review). */
static int report_errno;                /* report lock */
/* Its cancellation state: off while it reports. The symbol lookups open
 * files and the log is written to, cancellation points: a thread with a
 * cancel pending ended inside the report, the lock held, and the next
 * report waited for it for good (a review). */
static int report_cancel;               /* report lock */

void dbg_out_begin(void) {
    int e = errno, cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    spry_lock(&report_lock);
    report_errno = e;
    report_cancel = cancel;
    dbg_inside++;
    dbg_symbol_new_report();
}

void dbg_out_end(bool error) {
    out_flush();
    bool fatal = error && spry_option(SPRY_OPT_ABORT_ON_ERROR);
    if (fatal) {
        static const char msg[] = "spry-debug: aborting (SPRY_ABORT_ON_ERROR=1)\n";
        spry_os_write(log_get(), msg, sizeof msg - 1);
    }
    dbg_inside--;
    int e = report_errno, cancel = report_cancel;
    spry_unlock(&report_lock);
    if (error) spry_stat_add(&spry_stat.errors, 1);
    if (fatal) abort();
    pthread_setcancelstate(cancel, NULL);
    errno = e;
}

void dbg_out_block(size_t size, const void *p) {
    dbg_out_str("block of ");
    dbg_out_dec(size);
    dbg_out_str(size == 1 ? " byte at " : " bytes at ");
    dbg_out_hex((uintptr_t)p);
}

void dbg_out_frames(const char *title, void *const *pc, int n) {
    dbg_out_str(title);
    dbg_out_str(n ? "\n" : " (no stack)\n");
    for (int i = 0; i < n; i++) {
        dbg_out_str("    #");
        dbg_out_dec((unsigned long)i);
        dbg_out_str(i < 10 ? "  " : " ");
        dbg_out_hex((uintptr_t)pc[i]);
        dbg_out_str(" ");
        /* every frame kept is a return address: the allocator's own
         * frames, where the capture ran, are left out */
        dbg_symbol_print((uintptr_t)pc[i]);
        dbg_out_str("\n");
    }
}

void dbg_out_stack(const char *title, uint32_t id) {
    void *const *pc = NULL;
    int n = dbg_stack_frames(id, &pc);
    dbg_out_frames(title, pc, n);
}

static const char *family_name(unsigned f) {
    return f == SPRY_FAMILY_NEW ? "operator new" : f == SPRY_FAMILY_NEW_ARRAY ? "operator new[]" : "malloc";
}

void dbg_out_history(const dbg_block_t *b) {
    dbg_out_str("  The block (#");
    dbg_out_dec(b->seq);
    dbg_out_str(", ");
    dbg_out_dec(b->size);
    dbg_out_str(" bytes) was allocated with ");
    dbg_out_str(family_name(b->family));
    dbg_out_str(" by thread ");
    dbg_out_dec(b->tid);
    dbg_out_stack(" at:", b->alloc_stack);
    if (b->state != DBG_LIVE) {
        dbg_out_str("  It was freed by thread ");
        dbg_out_dec(b->free_tid);
        dbg_out_stack(" at:", b->free_stack);
    }
}

void dbg_out_dump(const uint8_t *p, size_t n) {
    dbg_out_str("    ");
    char text[2] = { 0, 0 };
    for (size_t i = 0; i < n; i++) {
        char hex[4] = { "0123456789abcdef"[p[i] >> 4], "0123456789abcdef"[p[i] & 15], ' ', 0 };
        dbg_out_str(hex);
    }
    dbg_out_str(" |");
    for (size_t i = 0; i < n; i++) {
        text[0] = p[i] >= 32 && p[i] < 127 ? (char)p[i] : '.';
        dbg_out_str(text);
    }
    dbg_out_str("|\n");
}

static void out_here(void) {
    void *pc[DBG_FRAMES];
    int n = dbg_stack_now(pc);
    dbg_out_frames("  The current stack:", pc, n);
}

void dbg_report_damage(const dbg_block_t *b, dbg_damage_t d, const char *when) {
    dbg_out_begin();
    dbg_out_head();
    dbg_out_str("ERROR: ");
    dbg_out_str(d.kind);
    dbg_out_str(": ");
    dbg_out_block(b->size, dbg_user(b));
    if (d.offset < 0) dbg_out_str(" was written before its start: the first bad byte is at offset -");
    else if (b->state == DBG_LIVE || d.offset >= (long)b->size) dbg_out_str(" was written past its end: the first bad byte is at offset ");
    else dbg_out_str(" was modified after it was freed: the first changed byte is at offset ");
    dbg_out_dec((unsigned long)(d.offset < 0 ? -d.offset : d.offset));
    dbg_out_str(" (");
    dbg_out_dec(d.count);
    dbg_out_str(d.count == 1 ? " byte changed), found " : " bytes changed), found ");
    dbg_out_str(when);
    dbg_out_str("\n");
    dbg_out_history(b);
    out_here();
    dbg_out_end(true);
}

void dbg_report_error(const char *kind, const char *call, const void *p, const char *why,
                      const dbg_block_t *b) {
    dbg_out_begin();
    dbg_out_head();
    dbg_out_str("ERROR: ");
    dbg_out_str(kind);
    dbg_out_str(": ");
    dbg_out_str(call);
    dbg_out_str("(");
    dbg_out_hex((uintptr_t)p);
    dbg_out_str("): ");
    dbg_out_str(why);
    if (b) {
        dbg_out_str(" (");
        dbg_out_block(b->size, dbg_user(b));
        dbg_out_str(")");
    }
    dbg_out_str("\n");
    if (b) dbg_out_history(b);
    out_here();
    dbg_out_end(true);
}

bool dbg_stack_top_is(uint32_t id, const char *prefix_a, const char *prefix_b) {
    void *const *pc;
    if (dbg_stack_frames(id, &pc) < 1) return false;
    dbg_out_begin();                     /* a report that writes nothing */
    const char *fn = dbg_symbol_function((uintptr_t)pc[0]);
    bool yes = fn && (strncmp(fn, prefix_a, strlen(prefix_a)) == 0 || strncmp(fn, prefix_b, strlen(prefix_b)) == 0);
    dbg_out_end(false);
    return yes;
}

void dbg_report_fork_prepare(void) { spry_lock(&report_lock); }
void dbg_report_fork_parent(void) { spry_unlock(&report_lock); }
void dbg_report_fork_child(void) {
    spry_lock_init(&report_lock);
    /* a per-process log name (%p) is the child's own file */
    if (log_fd > 2 && spry_option_text(SPRY_OPT_DEBUG_LOG) && strstr(spry_option_text(SPRY_OPT_DEBUG_LOG), "%p")) {
        spry_os_close(log_fd);      /* not close: a cancellation point */
        log_fd = -1;
    }
}
