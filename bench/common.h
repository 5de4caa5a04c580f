/* common.h - what every benchmark program shares.
 *
 * The programs are allocator-agnostic: they call plain malloc/free/realloc
 * (or new/delete) and the allocator under test is chosen by LD_PRELOAD. This
 * header holds the pieces that must be identical in every program so that
 * bench/run.py can read them all the same way:
 *
 *   - the output contract: one line per measurement on stdout,
 *       RESULT test=<name> allocator=<detected> key=value ... maxrss_kb=<n>
 *     progress and diagnostics on stderr;
 *   - the exit codes: 0 done, 1 allocation failed or the system refused
 *     (threads, clock), 2 bad arguments, 3 a block's contents were corrupt
 *     (a "CORRUPT ..." line on stderr says which);
 *   - the work generator: a splitmix64 PRNG, seeded per thread with
 *     base seed + thread index, so every allocator is given identical work;
 *   - option parsing from a table, so that --help is generated and every
 *     program rejects bad input the same way;
 *   - the stamp: a pattern derived from a block's address and size, written
 *     into a block after malloc and checked before free.
 *
 * Everything is static inline and usable from C11 and C++17 (objects and
 * pools are C++). Nothing here runs inside a timed loop except the PRNG and
 * the stamp functions, which are a few instructions each.
 */
#ifndef SPRY_BENCH_COMMON_H
#define SPRY_BENCH_COMMON_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum {
  BENCH_EXIT_OK = 0,
  BENCH_EXIT_FAILED = 1,  /* allocation failed, thread could not start */
  BENCH_EXIT_USAGE = 2,   /* bad arguments */
  BENCH_EXIT_CORRUPT = 3  /* a content check failed */
};

/* ---- fatal exits -------------------------------------------------------- */

/* Any thread may call these; _exit skips atexit handlers that could touch a
 * heap another thread is still using. stdout is flushed first so a partial
 * report is never lost, stderr is unbuffered. */
__attribute__((noreturn, format(printf, 2, 3)))
static inline void bench_die(int code, const char *fmt, ...)
{
  va_list ap;
  fflush(stdout);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  _exit(code);
}

__attribute__((noreturn))
static inline void bench_oom(const char *test, size_t size)
{
  bench_die(BENCH_EXIT_FAILED, "%s: allocation of %zu bytes failed", test, size);
}

/* ---- random numbers ----------------------------------------------------- */

/* splitmix64 (Steele, Lea, Flood 2014): one add and a mix per number, every
 * seed is a good seed, and the state is one word, so a thread keeps it in a
 * register. Thread t of a run with base seed s uses bench_rng_init(s + t). */
typedef struct bench_rng {
  uint64_t state;
} bench_rng;

static inline uint64_t bench_mix64(uint64_t z)
{
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static inline void bench_rng_init(bench_rng *r, uint64_t seed)
{
  r->state = bench_mix64(seed ^ 0x5370727942656e63ULL); /* "SpryBenc" */
}

static inline uint64_t bench_rng_next(bench_rng *r)
{
  r->state += 0x9e3779b97f4a7c15ULL;
  return bench_mix64(r->state);
}

/* Uniform in [0, n). Multiply-shift on the top 32 bits when n fits in 32
 * bits (no 128-bit type on -m32 builds); modulo otherwise. n must be > 0. */
static inline uint64_t bench_rng_below(bench_rng *r, uint64_t n)
{
  uint64_t x = bench_rng_next(r);
  if (n <= 0xffffffffULL)
    return ((x >> 32) * n) >> 32;
  return x % n;
}

/* Uniform in [lo, hi], both included. */
static inline uint64_t bench_rng_range(bench_rng *r, uint64_t lo, uint64_t hi)
{
  return lo + bench_rng_below(r, hi - lo + 1);
}

/* ---- time and memory ---------------------------------------------------- */

static inline double bench_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sleeps to an absolute deadline, so a signal cannot shorten the wait. */
static inline void bench_sleep(double seconds)
{
  struct timespec until;
  long long ns;
  clock_gettime(CLOCK_MONOTONIC, &until);
  ns = (long long)until.tv_nsec + (long long)(seconds * 1e9);
  until.tv_sec += (time_t)(ns / 1000000000LL);
  until.tv_nsec = (long)(ns % 1000000000LL);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
  }
}

/* Peak resident set of the whole process, in KiB: VmHWM of
 * /proc/self/status, the high-water mark of this program's own memory.
 * Not getrusage's ru_maxrss: Linux folds the high-water mark of the memory
 * the process had before exec into it, so under a runner that forked from a
 * 20 MiB Python process every program would report at least 20 MiB.
 * getrusage is the fallback where /proc cannot be read. */
static inline long bench_maxrss_kb(void)
{
  struct rusage ru;
  char line[256];
  long kb = -1;
  FILE *f = fopen("/proc/self/status", "r");
  if (f) {
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "VmHWM:", 6) == 0) {
        kb = strtol(line + 6, NULL, 10);
        break;
      }
    fclose(f);
  }
  if (kb > 0)
    return kb;
  if (getrusage(RUSAGE_SELF, &ru) != 0)
    return -1;
  return ru.ru_maxrss;
}

/* ---- which allocator is loaded ------------------------------------------ */

/* Reads /proc/self/maps: the first mapped library whose name says which
 * allocator it is wins. With no preload (or an unknown one) the answer is
 * glibc. The runner compares this with what it preloaded, which is how it
 * checks that a preload took effect. */
static inline const char *bench_detect_allocator(void)
{
  static const struct { const char *needle, *name; } known[] = {
    {"libspry", "spry"},         {"libjemalloc", "jemalloc"},
    {"libtcmalloc", "tcmalloc"}, {"libmimalloc", "mimalloc"},
  };
  static const char *cached;
  char line[4096];
  FILE *maps;
  if (cached)
    return cached;
  cached = "glibc";
  maps = fopen("/proc/self/maps", "r");
  if (!maps)
    return cached;
  while (fgets(line, sizeof line, maps)) {
    const char *slash = strrchr(line, '/');
    size_t i;
    if (!slash)
      continue;
    for (i = 0; i < sizeof known / sizeof known[0]; i++) {
      if (strncmp(slash + 1, known[i].needle, strlen(known[i].needle)) == 0) {
        cached = known[i].name;
        fclose(maps);
        return cached;
      }
    }
  }
  fclose(maps);
  return cached;
}

/* ---- the RESULT line ---------------------------------------------------- */

/* Prints "RESULT test=<test> allocator=<a> " + the caller's key=value pairs
 * + " maxrss_kb=<n>" and a newline, then flushes. fmt must produce
 * space-separated key=value pairs with no spaces inside values. */
__attribute__((format(printf, 2, 3)))
static inline void bench_result(const char *test, const char *fmt, ...)
{
  va_list ap;
  const char *alloc = bench_detect_allocator();
  printf("RESULT test=%s allocator=%s ", test, alloc);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf(" maxrss_kb=%ld\n", bench_maxrss_kb());
  fflush(stdout);
}

/* ---- options ------------------------------------------------------------ */

enum bench_opt_kind { BENCH_OPT_U64, BENCH_OPT_DOUBLE, BENCH_OPT_STR, BENCH_OPT_FLAG };

/* One row per option. dst points at the variable holding the default; it is
 * overwritten when the option is given. For U64 and DOUBLE, [min, max] is
 * the accepted range. A row with help == NULL is accepted but not listed
 * (test hooks such as --corrupt-test). FLAG sets a uint64_t to 1. */
typedef struct bench_opt {
  const char *name;          /* without the leading "--" */
  enum bench_opt_kind kind;
  void *dst;                 /* uint64_t*, double*, const char** */
  double min, max;
  const char *metavar;
  const char *help;
} bench_opt;

static inline void bench_usage(FILE *out, const char *prog, const char *about,
                               const bench_opt *opts, size_t n)
{
  size_t i;
  fprintf(out, "usage: %s [options]\n\n%s\n\noptions:\n", prog, about);
  for (i = 0; i < n; i++) {
    char left[64];
    const bench_opt *o = &opts[i];
    if (!o->help)
      continue;
    if (o->kind == BENCH_OPT_FLAG)
      snprintf(left, sizeof left, "--%s", o->name);
    else
      snprintf(left, sizeof left, "--%s %s", o->name, o->metavar ? o->metavar : "N");
    fprintf(out, "  %-22s %s", left, o->help);
    switch (o->kind) {
    case BENCH_OPT_U64:
      fprintf(out, " (default %llu)", (unsigned long long)*(uint64_t *)o->dst);
      break;
    case BENCH_OPT_DOUBLE:
      fprintf(out, " (default %g)", *(double *)o->dst);
      break;
    case BENCH_OPT_STR:
      fprintf(out, " (default %s)", *(const char **)o->dst);
      break;
    case BENCH_OPT_FLAG:
      break;
    }
    fputc('\n', out);
  }
  fprintf(out, "  %-22s %s\n\n", "--help", "print this and exit");
  fprintf(out,
          "Prints one line per measurement on stdout:\n"
          "  RESULT test=<name> allocator=<detected> key=value ... maxrss_kb=<peak RSS>\n"
          "The allocator is whatever LD_PRELOAD brought in (detected from /proc/self/maps).\n"
          "Exit codes: 0 done, 1 allocation failed, 2 bad arguments, 3 corrupt contents.\n");
}

__attribute__((noreturn, format(printf, 2, 3)))
static inline void bench_usage_error(const char *prog, const char *fmt, ...)
{
  va_list ap;
  if (strrchr(prog, '/'))
    prog = strrchr(prog, '/') + 1;
  fprintf(stderr, "%s: ", prog);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n(try %s --help)\n", prog);
  exit(BENCH_EXIT_USAGE);
}

/* Accepts "--name value" and "--name=value". Numbers are plain decimal
 * (U64) or any strtod form (DOUBLE); anything else, a value out of range,
 * an unknown option or a stray argument is a usage error (exit 2). --help
 * prints the generated usage on stdout and exits 0. */
static inline void bench_parse(int argc, char **argv, const char *about,
                               const bench_opt *opts, size_t n)
{
  const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  int a;
  for (a = 1; a < argc; a++) {
    const char *arg = argv[a], *val = NULL, *eq;
    size_t namelen, i;
    const bench_opt *o = NULL;
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      bench_usage(stdout, prog, about, opts, n);
      exit(BENCH_EXIT_OK);
    }
    if (strncmp(arg, "--", 2) != 0)
      bench_usage_error(prog, "unexpected argument '%s'", arg);
    arg += 2;
    eq = strchr(arg, '=');
    namelen = eq ? (size_t)(eq - arg) : strlen(arg);
    for (i = 0; i < n; i++) {
      if (strlen(opts[i].name) == namelen && strncmp(opts[i].name, arg, namelen) == 0) {
        o = &opts[i];
        break;
      }
    }
    if (!o)
      bench_usage_error(prog, "unknown option '%s'", argv[a]);
    if (o->kind == BENCH_OPT_FLAG) {
      if (eq)
        bench_usage_error(prog, "--%s takes no value", o->name);
      *(uint64_t *)o->dst = 1;
      continue;
    }
    if (eq)
      val = eq + 1;
    else if (a + 1 < argc)
      val = argv[++a];
    else
      bench_usage_error(prog, "--%s needs a value", o->name);
    if (o->kind == BENCH_OPT_STR) {
      *(const char **)o->dst = val;
    } else {
      char *end = NULL;
      double d;
      errno = 0;
      if (o->kind == BENCH_OPT_U64) {
        unsigned long long u;
        if (*val < '0' || *val > '9')
          bench_usage_error(prog, "--%s: '%s' is not a whole number", o->name, val);
        u = strtoull(val, &end, 10);
        if (errno || *end)
          bench_usage_error(prog, "--%s: '%s' is not a whole number", o->name, val);
        d = (double)u;
        if (d < o->min || d > o->max)
          bench_usage_error(prog, "--%s: %s is outside [%.0f, %.0f]", o->name, val,
                            o->min, o->max);
        *(uint64_t *)o->dst = (uint64_t)u;
      } else {
        d = strtod(val, &end);
        if (errno || *end || end == val || !(d >= o->min && d <= o->max))
          bench_usage_error(prog, "--%s: '%s' is not a number in [%g, %g]", o->name, val,
                            o->min, o->max);
        *(double *)o->dst = d;
      }
    }
  }
}

/* ---- threads ------------------------------------------------------------ */

/* Starts n threads running fn(arg_base + i * arg_stride). Threads get 1 MiB
 * stacks: the workers need little, and with 64 threads in a 32-bit build
 * the default 8 MiB stacks would eat address space the test measures. */
static inline void bench_spawn(pthread_t *tids, size_t n, void *(*fn)(void *),
                               void *arg_base, size_t arg_stride)
{
  pthread_attr_t attr;
  size_t i;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, (size_t)1 << 20);
  for (i = 0; i < n; i++) {
    int rc = pthread_create(&tids[i], &attr, fn, (char *)arg_base + i * arg_stride);
    if (rc != 0)
      bench_die(BENCH_EXIT_FAILED, "pthread_create: %s", strerror(rc));
  }
  pthread_attr_destroy(&attr);
}

/* The wall time of a parallel phase is measured by the workers themselves:
 * each reads the clock right after the start barrier releases it and again
 * when its work is done, and the phase lasts from the earliest start to the
 * latest end. The main thread's own clock readings are not used, because
 * on an oversubscribed machine (64 threads on 2 cores) it may not run again
 * until the workers are long under way. */
struct bench_span {
  double start, end;
};

static inline double bench_span_seconds(const struct bench_span *s, size_t n, size_t stride)
{
  double first = 0, last = 0;
  size_t i;
  for (i = 0; i < n; i++) {
    const struct bench_span *x = (const struct bench_span *)((const char *)s + i * stride);
    if (i == 0 || x->start < first)
      first = x->start;
    if (i == 0 || x->end > last)
      last = x->end;
  }
  return last - first;
}

static inline void bench_join(pthread_t *tids, size_t n)
{
  size_t i;
  for (i = 0; i < n; i++)
    pthread_join(tids[i], NULL);
}

/* ---- stamps: content checks --------------------------------------------- */

/* How much of a block the stamp writes (and the check reads):
 *   ENDS  the first and last 8 bytes (every byte when the block is < 16);
 *   PAGES ENDS plus one byte at every 4 KiB offset, so each page is touched;
 *   ALL   every byte.
 * ENDS is the default: it proves the block is really ours (an overlap with
 * another live block or a corrupted header shows up at the ends) while the
 * cost stays independent of the block size, so a 256 KiB band measures the
 * allocator, not memset. */
enum bench_touch { BENCH_TOUCH_ENDS, BENCH_TOUCH_PAGES, BENCH_TOUCH_ALL };

static inline int bench_touch_parse(const char *s, enum bench_touch *out)
{
  if (strcmp(s, "ends") == 0)
    *out = BENCH_TOUCH_ENDS;
  else if (strcmp(s, "pages") == 0)
    *out = BENCH_TOUCH_PAGES;
  else if (strcmp(s, "all") == 0)
    *out = BENCH_TOUCH_ALL;
  else
    return -1;
  return 0;
}

/* The --touch option: its entry in a program's table, and its value once
 * bench_parse has run (a bad one is a usage error). */
#define BENCH_OPT_TOUCH(name)                                                  \
  {"touch", BENCH_OPT_STR, &(name), 0, 0, "ends|pages|all",                    \
   "how much of each block is stamped and checked"}

static inline enum bench_touch bench_touch_option(const char *prog, const char *name)
{
  enum bench_touch touch;
  if (bench_touch_parse(name, &touch) != 0)
    bench_usage_error(prog, "--touch must be ends, pages or all");
  return touch;
}

/* The pattern depends on the address and the size, so a block handed out
 * twice at once, or a stale pattern left by a previous owner, fails. */
static inline uint64_t bench_pattern(const void *p, size_t n)
{
  return bench_mix64((uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ULL ^ (uint64_t)n);
}

static inline void bench_stamp(void *p, size_t n, enum bench_touch touch)
{
  unsigned char *b = (unsigned char *)p;
  uint64_t w = bench_pattern(p, n);
  size_t i;
  if (n < 16 || touch == BENCH_TOUCH_ALL) {
    for (i = 0; i + 8 <= n; i += 8)
      memcpy(b + i, &w, 8);
    for (; i < n; i++)
      b[i] = (unsigned char)(w >> (8 * (i & 7)));
    return;
  }
  memcpy(b, &w, 8);
  memcpy(b + n - 8, &w, 8);
  if (touch == BENCH_TOUCH_PAGES)
    for (i = 4096; i + 8 < n; i += 4096)
      b[i] = (unsigned char)(w ^ (i >> 12));
}

/* 1 when the stamp written by bench_stamp(p, n, touch) is intact. */
static inline int bench_stamp_ok(const void *p, size_t n, enum bench_touch touch)
{
  const unsigned char *b = (const unsigned char *)p;
  uint64_t w = bench_pattern(p, n), got;
  size_t i;
  if (n < 16 || touch == BENCH_TOUCH_ALL) {
    for (i = 0; i + 8 <= n; i += 8) {
      memcpy(&got, b + i, 8);
      if (got != w)
        return 0;
    }
    for (; i < n; i++)
      if (b[i] != (unsigned char)(w >> (8 * (i & 7))))
        return 0;
    return 1;
  }
  memcpy(&got, b, 8);
  if (got != w)
    return 0;
  memcpy(&got, b + n - 8, 8);
  if (got != w)
    return 0;
  if (touch == BENCH_TOUCH_PAGES)
    for (i = 4096; i + 8 < n; i += 4096)
      if (b[i] != (unsigned char)(w ^ (i >> 12)))
        return 0;
  return 1;
}

/* Reports a failed content check and exits 3. */
__attribute__((noreturn))
static inline void bench_corrupt(const char *test, const void *p, size_t n, const char *what)
{
  bench_die(BENCH_EXIT_CORRUPT, "CORRUPT test=%s block=%p size=%zu: %s", test, p, n, what);
}

/* ---- the slot walk: a working set of about K live blocks ------------------
 *
 * churn, mixed and large keep their live blocks in an array of 2K slots,
 * half of them filled at the start. One step picks a slot uniformly at
 * random: a filled one is checked and freed (bench_slot_release), an empty
 * one gets a new block (bench_slot_fill). The number of live blocks then
 * wanders around K (a free is as likely as the share of filled slots), frees
 * come in random order, not the reverse of the mallocs, and a malloc does not
 * always follow the free of a block of its size: runs of frees empty pages
 * and runs of mallocs fill them, as in a program whose working set is K
 * blocks. Each step is one allocator call. */

/* mallocs n bytes into slot k (empty), stamps the block. */
static inline void bench_slot_fill(const char *test, void **slot, size_t *size, size_t k,
                                   size_t n, enum bench_touch touch)
{
  void *p = malloc(n);
  if (!p)
    bench_oom(test, n);
  bench_stamp(p, n, touch);
  slot[k] = p;
  size[k] = n;
}

/* Checks the stamp of slot k's block (filled), frees it, empties the slot. */
static inline void bench_slot_release(const char *test, void **slot, size_t *size, size_t k,
                                      enum bench_touch touch)
{
  if (!bench_stamp_ok(slot[k], size[k], touch))
    bench_corrupt(test, slot[k], size[k], "stamp damaged before free");
  free(slot[k]);
  slot[k] = NULL;
}

/* Teardown of a worker's live slots: checks every block's stamp (a damaged
 * one ends the run through bench_corrupt), frees the blocks and the arrays.
 * Empty slots (NULL) are skipped. */
static inline void bench_slots_free(const char *test, void **slot, size_t *size, uint64_t live,
                                    enum bench_touch touch)
{
  uint64_t k;
  for (k = 0; k < live; k++) {
    if (!slot[k])
      continue;
    if (!bench_stamp_ok(slot[k], size[k], touch))
      bench_corrupt(test, slot[k], size[k], "stamp damaged at teardown");
    free(slot[k]);
  }
  free(slot);
  free(size);
}

#endif /* SPRY_BENCH_COMMON_H */
