/* Statistics: spry_stats_get, spry_stats_print; see stats.h. */
#include "stats.h"
#include "options.h"
#include "fmt.h"
#include "os.h"
#include "heap.h"
#include "sizeclass.h"
#include "lock.h"
#include "../include/spry.h"
#include <errno.h>
#include <string.h>
#include <unistd.h>

spry_stat_counters_t spry_stat;

/* The class table near the peak, for the print: at exit the program has
 * usually freed what it used, and the table of the moment says little
 * about where its memory went. Taken only with SPRY_STATS set (a walk costs
 * what a print does: each heap's lock held while the kernel is asked about
 * its segments, one call a segment), by a pass that sees committed an
 * eighth above the last sample: at most one walk a pass, none once the peak
 * stops rising, so the table is from within an eighth of the highest
 * committed the passes saw. A program that never frees has no passes, and
 * its table at exit is its peak. The samples are written under the pass
 * lock (one writer); peak_lock guards the copy the print reads, and nothing
 * else is taken while it is held. */
#define CLASSES_BYTES ((SPRY_WALK_ROWS * sizeof(spry_class_walk_t) + 4095) & ~(size_t)4095)
static spry_lock_t peak_lock = SPRY_LOCK_INIT;
static spry_class_walk_t *peak_walk;     /* the pass's own table, then copied */
static spry_class_walk_t *peak_classes;  /* the last sample (peak_lock)      */
static size_t peak_committed;            /* committed then; 0: none yet       */
static uint64_t peak_ms;                 /* spry_os_now_ms() then             */
static bool peak_refused;                /* the kernel refused the tables     */

static void stat_sub_saturating(_Atomic(size_t) *c, size_t v) {
    /* Estimates can cross (a purge of memory already counted clean); never wrap. */
    size_t cur = atomic_load_explicit(c, memory_order_relaxed);
    size_t next;
    do { next = cur > v ? cur - v : 0; }
    while (!atomic_compare_exchange_weak_explicit(c, &cur, next,
                                                  memory_order_relaxed, memory_order_relaxed));
}

void spry_stat_in_use_add(size_t v) {
    size_t now = atomic_fetch_add_explicit(&spry_stat.in_use, v, memory_order_relaxed) + v;
    now += atomic_load_explicit(&spry_stat.dirty, memory_order_relaxed);
    size_t peak = atomic_load_explicit(&spry_stat.committed_peak, memory_order_relaxed);
    while (now > peak &&
           !atomic_compare_exchange_weak_explicit(&spry_stat.committed_peak, &peak, now,
                                                  memory_order_relaxed, memory_order_relaxed)) {}
}

void spry_stat_in_use_sub(size_t v) { stat_sub_saturating(&spry_stat.in_use, v); }
void spry_stat_dirty_add(size_t v)  { spry_stat_add(&spry_stat.dirty, v); }
void spry_stat_dirty_sub(size_t v)  { stat_sub_saturating(&spry_stat.dirty, v); }

/* Process totals: the global counters plus every heap's span counters. */
static void stats_collect(spry_stats_t *out) {
#define X(name, bytes, doc) out->name = atomic_load_explicit(&spry_stat.name, memory_order_relaxed);
    SPRY_STAT_LIST(X)
#undef X
    spry_heaps_span_totals(&out->in_use, &out->dirty);
    out->committed = out->in_use + out->dirty;
    size_t peak = atomic_load_explicit(&spry_stat.committed_peak, memory_order_relaxed);
    while (out->committed > peak &&
           !atomic_compare_exchange_weak_explicit(&spry_stat.committed_peak, &peak, out->committed,
                                                  memory_order_relaxed, memory_order_relaxed)) {}
    if (out->committed > out->committed_peak) out->committed_peak = out->committed;
}

static void peak_sample(size_t committed) {
    if (!peak_walk && !peak_refused) {
        /* both tables in one mapping, kept for the process's life */
        uint8_t *both = spry_os_reserve(2 * CLASSES_BYTES, 4096);
        if (!both) { peak_refused = true; return; }
        peak_walk = (spry_class_walk_t *)both;
        spry_lock(&peak_lock);
        peak_classes = (spry_class_walk_t *)(both + CLASSES_BYTES);
        spry_unlock(&peak_lock);
    }
    if (!peak_walk) return;
    memset(peak_walk, 0, CLASSES_BYTES);
    spry_heap_walk_t w = {0};
    spry_heaps_walk(&w, peak_walk);
    spry_lock(&peak_lock);
    memcpy(peak_classes, peak_walk, CLASSES_BYTES);
    peak_committed = committed;
    peak_ms = spry_os_now_ms();
    spry_unlock(&peak_lock);
}

void spry_stat_sample_peak(void) {
    spry_stats_t s;
    stats_collect(&s);
    /* peak_committed: written by this function only, under the pass lock.
     * Again only once committed grew by an eighth: a walk of every heap
     * took back to back (a pass longer than the delay is followed at once
     * by the next; inline passes ran walks inside malloc one after another,
     * 8 threads growing to 40,000 pages took 90 s instead of 0.7, a
     * review), where now a run growing to N bytes walks about
     * log(N) / log(9/8) times, all its walks costing about 9 times its last. */
    if (spry_option(SPRY_OPT_STATS) && s.committed > peak_committed + peak_committed / 8)
        peak_sample(s.committed);
}

void spry_stats_fork_prepare(void) { spry_lock(&peak_lock); }
void spry_stats_fork_parent(void)  { spry_unlock(&peak_lock); }
void spry_stats_fork_child(void)   { spry_lock_init(&peak_lock); }

__attribute__((visibility("default")))
void spry_stats_get(spry_stats_t *out) {
    if (out) stats_collect(out);
}

/* ---- printing -------------------------------------------------------------
 * One record per call, text or one line of JSON, gathered in a buffer and
 * written with one write(2): processes sharing a stats file (a program and
 * its children) append whole records, each led by its pid. The buffer holds
 * the longest record: two path options of 4,095 bytes, each byte escaped to
 * 6 in JSON (49 KiB), two class tables of every class with 20-digit
 * figures (22 KiB each) and the rest (a few KiB). A record on an 8 KiB
 * stack buffer went out in two writes past it, and one with the peak's
 * table in 64 KiB (68 KiB: reviews). It is mapped for the call, off the
 * thread's stack; where the kernel refuses, a small stack buffer serves,
 * the record then written in pieces. Small: the print at exit runs on the
 * stack of the thread that called exit, and a thread of PTHREAD_STACK_MIN
 * (16 KiB, about 12 free) overflowed with the 8 KiB buffer this had (a
 * review: SPRY_STATS=2, SIGSEGV). */
#define OUT_BIG ((size_t)128 * 1024)
#define OUT_SMALL ((size_t)1024)

typedef struct stats_out {
    int  fd;
    bool json;
    bool first;             /* JSON: no comma before the next member */
    size_t len, cap;
    char *buf;
} stats_out_t;

static void out_bytes(stats_out_t *o, const char *s, size_t n) {
    if (o->len + n > o->cap) {
        spry_os_write(o->fd, o->buf, o->len);
        o->len = 0;
    }
    if (n > o->cap) { spry_os_write(o->fd, s, n); return; }
    for (size_t i = 0; i < n; i++) o->buf[o->len++] = s[i];
}

/* Bytes of the valid UTF-8 sequence at s (1 for ASCII), or 0 when it is
 * not one (JSON text is UTF-8: a path option's other bytes made the record
 * unreadable, a review). */
static size_t utf8_length(const unsigned char *s) {
    size_t n = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
             : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    /* no overlong forms, no surrogates, nothing past U+10FFFF */
    if (n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0;
    if (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;
    return n;
}

static void out_fmt(stats_out_t *o, spry_fmt_t *f) {
    out_bytes(o, f->buf, f->len);
    f->len = 0;
}

/* A JSON string: quotes, backslashes and control bytes escaped, a byte
 * that is not part of valid UTF-8 written as U+FFFD. */
static void out_json_string(stats_out_t *o, const char *s) {
    out_bytes(o, "\"", 1);
    while (*s) {
        unsigned char c = (unsigned char)*s;
        size_t n = utf8_length((const unsigned char *)s);
        if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            out_bytes(o, e, 2);
        } else if (c < 0x20) {
            static const char hex[] = "0123456789abcdef";
            char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
            out_bytes(o, e, 6);
        } else if (n == 0) {
            out_bytes(o, "\\ufffd", 6);
            n = 1;
        } else {
            out_bytes(o, s, n);
        }
        s += n;
    }
    out_bytes(o, "\"", 1);
}

/* A JSON member's "name": with the comma it needs. */
static void out_json_key(stats_out_t *o, const char *name) {
    if (!o->first) out_bytes(o, ",", 1);
    o->first = false;
    out_json_string(o, name);
    out_bytes(o, ":", 1);
}

/* A figure: "  prefix.name: v (x MiB)  # doc" or "name":v; `bytes`: an
 * amount of memory, in text also in KiB or MiB when large. */
static void out_value(stats_out_t *o, const char *prefix, const char *name, size_t v, bool bytes,
                      const char *doc) {
    spry_fmt_t f; spry_fmt_init(&f);
    if (o->json) {
        out_json_key(o, name);
        spry_fmt_ulong(&f, v);
        out_fmt(o, &f);
        return;
    }
    spry_fmt_str(&f, "  ");
    spry_fmt_str(&f, prefix);
    spry_fmt_str(&f, name);
    spry_fmt_str(&f, ": ");
    spry_fmt_ulong(&f, v);
    if (bytes && v >= 10 * 1024) {
        spry_fmt_str(&f, " (");
        if (v >= 10u * 1024 * 1024) { spry_fmt_ulong(&f, v >> 20); spry_fmt_str(&f, " MiB)"); }
        else { spry_fmt_ulong(&f, v >> 10); spry_fmt_str(&f, " KiB)"); }
    }
    spry_fmt_str(&f, "  # ");
    spry_fmt_str(&f, doc);
    spry_fmt_str(&f, "\n");
    out_fmt(o, &f);
}

/* An amount of memory. */
static void out_figure(stats_out_t *o, const char *prefix, const char *name, size_t v, const char *doc) {
    out_value(o, prefix, name, v, true, doc);
}

/* A number of events: no KiB or MiB. */
static void out_count(stats_out_t *o, const char *prefix, const char *name, size_t v, const char *doc) {
    out_value(o, prefix, name, v, false, doc);
}

/* A group: a header line in text, a nested object in JSON. */
static void out_group_open(stats_out_t *o, const char *json_key, const char *text_header) {
    if (o->json) {
        out_json_key(o, json_key);
        out_bytes(o, "{", 1);
        o->first = true;
    } else if (text_header) {
        spry_fmt_t f; spry_fmt_init(&f);
        spry_fmt_str(&f, text_header);
        out_fmt(o, &f);
    }
}

static void out_group_close(stats_out_t *o) {
    if (o->json) out_bytes(o, "}", 1);
    o->first = false;
}

static void out_option(stats_out_t *o, spry_option_t opt) {
    const char *name, *doc, *text = spry_option_text(opt);
    bool path = spry_option_describe(opt, &name, &doc);
    spry_fmt_t f; spry_fmt_init(&f);
    if (o->json) {
        out_json_key(o, name);
        if (text) out_json_string(o, text);
        else if (path) out_bytes(o, "null", 4);
        else { spry_fmt_long(&f, spry_option(opt)); out_fmt(o, &f); }
        return;
    }
    spry_fmt_str(&f, "  "); spry_fmt_str(&f, name); spry_fmt_str(&f, "=");
    out_fmt(o, &f);
    if (text) out_bytes(o, text, strlen(text));
    else if (!path) { spry_fmt_long(&f, spry_option(opt)); out_fmt(o, &f); }
    spry_fmt_str(&f, "  # "); spry_fmt_str(&f, doc); spry_fmt_str(&f, "\n");
    out_fmt(o, &f);
}

/* One row of the census: "  <label>: name v name v ..." in text, the
 * object "<key>": {"name": v, ...} in JSON. */
static void out_row(stats_out_t *o, const char *key, const char *label, const char *const *names,
                    const size_t *v, size_t n) {
    spry_fmt_t f; spry_fmt_init(&f);
    if (o->json) {
        out_group_open(o, key, NULL);
        for (size_t i = 0; i < n; i++) {
            out_json_key(o, names[i]);
            spry_fmt_ulong(&f, v[i]);
            out_fmt(o, &f);
        }
        out_group_close(o);
        return;
    }
    spry_fmt_str(&f, "  ");
    spry_fmt_str(&f, label);
    spry_fmt_str(&f, ":");
    for (size_t i = 0; i < n; i++) {
        spry_fmt_str(&f, " ");
        spry_fmt_str(&f, names[i]);
        spry_fmt_str(&f, " ");
        spry_fmt_ulong(&f, v[i]);
    }
    spry_fmt_str(&f, "\n");
    out_fmt(o, &f);
}

/* The segments' memory outside the classes (heap.h, SPRY_WALK_LARGE..):
 * with the classes' rows it accounts for every resident byte of the
 * segments. A row each in text, "spans": {"large": {...}, ...} in JSON. */
static void out_spans(stats_out_t *o, const spry_class_walk_t *cw) {
    static const struct { unsigned row; const char *name, *count; } rows[] = {
        { SPRY_WALK_LARGE, "large", "spans" },      /* of large blocks not yet freed */
        { SPRY_WALK_FREE, "free", "slices" },       /* in no page, kept spans too */
        { SPRY_WALK_HEADERS, "headers", "segments" },
    };
    out_group_open(o, "spans", NULL);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const spry_class_walk_t *w = &cw[rows[r].row];
        if (!w->pages) continue;
        const char *names[] = { rows[r].count, "spanned", "resident", "in_use", "waiting" };
        size_t v[] = { w->pages, w->spanned, w->resident, w->in_use, w->waiting };
        out_row(o, rows[r].name, rows[r].name, names, v, rows[r].row == SPRY_WALK_LARGE ? 5 : 3);
    }
    out_group_close(o);
}

/* The size classes that have pages: a row each in text ("3072 B"), an
 * object keyed by the class's block size in JSON; then the segments'
 * other memory. */
static void out_classes(stats_out_t *o, const spry_class_walk_t *cw, const char *header) {
    static const char *const names[] = { "pages", "spanned", "resident", "carved", "in_use", "cached",
                                         "waiting" };
    out_group_open(o, "classes", header);
    for (unsigned c = 0; c < SPRY_CLASS_COUNT; c++) {
        const spry_class_walk_t *w = &cw[c];
        if (!w->pages) continue;
        size_t v[] = { w->pages, w->spanned, w->resident, w->carved, w->in_use, w->cached, w->waiting };
        spry_fmt_t key;
        spry_fmt_init(&key);
        spry_fmt_ulong(&key, spry_class_size(c));
        key.buf[key.len] = 0;                  /* a few digits */
        spry_fmt_t label = key;
        spry_fmt_str(&label, " B");
        label.buf[label.len] = 0;
        out_row(o, key.buf, label.buf, names, v, sizeof v / sizeof v[0]);
    }
    out_group_close(o);
    out_spans(o, cw);
}

static void stats_write(int fd, bool json) {
    char small[OUT_SMALL];
    char *big = spry_os_reserve(OUT_BIG, 4096);
    stats_out_t o = { .fd = fd, .json = json, .first = true, .cap = big ? OUT_BIG : OUT_SMALL,
                      .buf = big ? big : small };
    spry_stats_t s;
    stats_collect(&s);
    spry_heap_walk_t w = {0};
    /* 6 KiB, off the stack like the big buffer (any thread may print);
     * fresh from the kernel, so zeroed; no table when refused */
    spry_class_walk_t *classes = spry_os_reserve(CLASSES_BYTES, 4096);
    spry_heaps_walk(&w, classes);
    spry_fmt_t f; spry_fmt_init(&f);
    if (json) spry_fmt_str(&f, "{\"pid\":");
    else spry_fmt_str(&f, "spry statistics (pid ");
    spry_fmt_long(&f, (long)getpid());
    spry_fmt_str(&f, json ? "" : "):\n");
    out_fmt(&o, &f);
    o.first = false;
#define X(name, bytes, doc) out_value(&o, "", #name, s.name, bytes, doc);
    SPRY_STAT_LIST(X)
#undef X
#define X(name, bytes, doc) out_value(&o, "", #name, atomic_load_explicit(&spry_stat.name, memory_order_relaxed), bytes, doc);
    SPRY_STAT_LIST_PRINTED(X)
#undef X
    out_group_open(&o, "walk", NULL);
    out_count(&o, "walk.", "segments", w.segments, "segments owned by heaps");
    out_count(&o, "walk.", "free_slices", w.free_slices, "64 KiB slices free in them");
    out_count(&o, "walk.", "class_pages", w.class_pages, "pages of size classes");
    out_count(&o, "walk.", "full_pages", w.full_pages, "of which full (or with their free blocks in the block cache)");
    out_count(&o, "walk.", "large_pages", w.large_pages, "pages holding one large block");
    out_figure(&o, "walk.", "class_bytes", w.class_bytes, "bytes spanned by class pages");
    out_figure(&o, "walk.", "used_bytes", w.used_bytes, "bytes in blocks not freed (or not yet collected)");
    out_count(&o, "walk.", "pages_made", w.pages_made, "class pages set up on a span, so far");
    out_count(&o, "walk.", "pages_given_back", w.pages_given_back, "class pages whose span went back, so far");
    out_count(&o, "walk.", "spares_taken", w.spares_taken, "emptied class pages kept and taken again, so far");
    out_group_close(&o);
    if (classes) {
        out_classes(&o, classes, "spry size classes (pages; bytes spanned by them, resident, carved, in use, "
                                 "in block caches, freed by other threads and not yet collected), then the "
                                 "segments' other slices (large blocks' spans; slices in no page, free or "
                                 "kept for reuse; headers):\n");
        /* the last sample, copied out: the print runs without the lock */
        size_t committed = 0;
        uint64_t at = 0;
        spry_lock(&peak_lock);
        if (peak_committed) {
            memcpy(classes, peak_classes, CLASSES_BYTES);
            committed = peak_committed;
            at = peak_ms;
        }
        spry_unlock(&peak_lock);
        if (committed) {
            uint64_t now = spry_os_now_ms();
            out_group_open(&o, "peak", "spry size classes near the peak (the last table a purge pass took, "
                                       "each an eighth above the one before; SPRY_STATS only; the same "
                                       "columns):\n");
            out_figure(&o, "peak.", "committed", committed, "committed when the table below was taken");
            out_count(&o, "peak.", "age_ms", now > at ? (size_t)(now - at) : 0, "milliseconds before this print");
            out_classes(&o, classes, NULL);
            out_group_close(&o);
        }
        spry_os_release(classes, CLASSES_BYTES);
    }
    out_group_open(&o, "options", "spry options:\n");
    for (int i = 0; i < SPRY_OPT_COUNT; i++) out_option(&o, (spry_option_t)i);
    out_group_close(&o);
    if (json) out_bytes(&o, "}\n", 2);
    spry_os_write(fd, o.buf, o.len);
    if (big) spry_os_release(big, OUT_BIG);
}

__attribute__((visibility("default")))
void spry_stats_print(int fd) {
    stats_write(fd, false);
}

void spry_stats_at_exit(void) {
    const char *path = spry_option_text(SPRY_OPT_STATS_FILE);
    int fd = path ? spry_os_open_append(path) : 2;
    if (fd < 0) {
        /* not a programming error of the program: said, not counted */
        int e = errno;
        if (spry_option(SPRY_OPT_VERBOSE)) {
            spry_fmt_t f; spry_fmt_init(&f);
            spry_fmt_str(&f, "spry: cannot open SPRY_STATS_FILE=");
            spry_fmt_str(&f, path);
            spry_fmt_str(&f, " (");
            spry_fmt_str(&f, spry_os_open_error(e));
            spry_fmt_str(&f, ")\n");
            spry_fmt_flush(&f, 2);
        }
        return;
    }
    stats_write(fd, spry_option(SPRY_OPT_STATS) == 2);
    if (path) spry_os_close(fd);
}
