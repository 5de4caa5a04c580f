/* prodcons.c - producer/consumer: blocks allocated by one thread and freed
 * by another (issue 8, "the server pattern").
 *
 * --producers threads malloc blocks of uniform random size in [--min,
 * --max] (a few KiB at most by default, as a server's requests and
 * responses), stamp them and hand them to --consumers threads, which check
 * each block's stamp and free it. Every block is freed by a thread other
 * than the one that allocated it, which is the case per-thread heaps find
 * hardest: the memory has to find its way back to its owner.
 *
 * The hand-over: one bounded single-producer single-consumer ring per
 * (producer, consumer) pair, --ring entries each. A producer deals its
 * blocks round-robin over its rings (skipping a full one), so every
 * consumer frees blocks of every producer; a consumer drains its rings in
 * turn. A thread that finds nothing to do (all its rings full, or all
 * empty) yields the CPU, so the test also runs with more threads than
 * cores. The rings need no lock: one atomic head and tail each, written by
 * one side only (release) and read by the other (acquire).
 *
 * Producers run for --seconds; consumers then drain what is left. ops is
 * the number of blocks handed over (one malloc in a producer, one free in a
 * consumer); mops is millions per second of wall time, from the first
 * thread's start to the last consumer's end. Peak RSS is the other half of
 * the result: how much memory an allocator holds while blocks stream
 * between threads.
 */
#include "common.h"

#include <sched.h>
#include <stdatomic.h>

#define TEST_NAME "prodcons"

static struct {
  uint64_t producers, consumers, min, max, ring, seed, corrupt_test;
  double seconds;
  const char *touch_name;
  enum bench_touch touch;
} cfg = {1, 1, 8, 4096, 256, 1, 0, 1.0, "ends", BENCH_TOUCH_ENDS};

struct item {
  void *p;
  size_t n;
};

/* A bounded SPSC ring. tail is written by its producer only, head by its
 * consumer only; each sits on its own cache line. A producer publishes an
 * item by storing tail with release after writing the slot; the consumer
 * reads tail with acquire before reading the slot, and publishes the slot
 * as free by storing head with release, which the producer reads with
 * acquire before overwriting it. */
struct ring {
  _Alignas(64) atomic_size_t tail;
  _Alignas(64) atomic_size_t head;
  _Alignas(64) struct item *items;
};

static struct ring *rings; /* [producer * consumers + consumer] */
static size_t ring_mask;
static atomic_int stop_flag;         /* main -> producers, written once */
static atomic_uint producers_done;   /* producers -> consumers */
static pthread_barrier_t start_line;

/* One per thread (producers first, then consumers); written by its thread,
 * read by the main thread after join. */
struct worker {
  struct bench_span span;
  uint64_t index;
  uint64_t count; /* blocks produced or consumed */
};

static int ring_push(struct ring *r, void *p, size_t n)
{
  size_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
  size_t head = atomic_load_explicit(&r->head, memory_order_acquire);
  if (tail - head > ring_mask)
    return 0;
  r->items[tail & ring_mask].p = p;
  r->items[tail & ring_mask].n = n;
  atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
  return 1;
}

static void *producer(void *arg)
{
  struct worker *w = (struct worker *)arg;
  struct ring *mine = rings + w->index * cfg.consumers;
  size_t next = 0, c = (size_t)cfg.consumers;
  uint64_t count = 0;
  bench_rng rng;

  bench_rng_init(&rng, cfg.seed + w->index);
  pthread_barrier_wait(&start_line);
  w->span.start = bench_now();
  while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
    size_t n = (size_t)bench_rng_range(&rng, cfg.min, cfg.max), full = 0;
    void *p = malloc(n);
    if (!p)
      bench_oom(TEST_NAME, n);
    bench_stamp(p, n, cfg.touch);
    /* Round-robin over the consumers, skipping full rings; when all are
     * full, let the consumers run. */
    while (!ring_push(&mine[next], p, n)) {
      next = next + 1 == c ? 0 : next + 1;
      if (++full == c) {
        sched_yield();
        full = 0;
      }
    }
    next = next + 1 == c ? 0 : next + 1;
    count++;
  }
  w->span.end = bench_now();
  w->count = count;
  atomic_fetch_add_explicit(&producers_done, 1, memory_order_release);
  return NULL;
}

/* Checks and frees what ring r holds; returns how many. */
static uint64_t ring_drain(struct worker *w, struct ring *r, uint64_t consumed)
{
  size_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  size_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
  uint64_t got = 0;
  for (; head != tail; head++) {
    struct item it = r->items[head & ring_mask];
    /* --corrupt-test: consumer 0 damages its 100th block, once. */
    if (cfg.corrupt_test && w->index == cfg.producers && consumed + got == 100)
      ((unsigned char *)it.p)[it.n - 1] ^= 0x5a;
    if (!bench_stamp_ok(it.p, it.n, cfg.touch))
      bench_corrupt(TEST_NAME, it.p, it.n, "stamp damaged when the consumer got it");
    free(it.p);
    got++;
  }
  atomic_store_explicit(&r->head, head, memory_order_release);
  return got;
}

static void *consumer(void *arg)
{
  struct worker *w = (struct worker *)arg;
  size_t j = (size_t)(w->index - cfg.producers), i;
  uint64_t count = 0;

  pthread_barrier_wait(&start_line);
  w->span.start = bench_now();
  for (;;) {
    /* Read before the pass: when every producer had finished before it,
     * an empty pass means the rings are empty for good. */
    unsigned done = atomic_load_explicit(&producers_done, memory_order_acquire);
    uint64_t got = 0;
    for (i = 0; i < cfg.producers; i++)
      got += ring_drain(w, &rings[i * cfg.consumers + j], count + got);
    count += got;
    if (got == 0) {
      if (done == cfg.producers)
        break;
      sched_yield();
    }
  }
  w->span.end = bench_now();
  w->count = count;
  return NULL;
}

/* Blocks in the rings, sampled by the main thread while the producers run. */
struct held {
  uint64_t samples, sum, max;
};

/* Sleeps for --seconds, counting every millisecond the blocks that sit in
 * the rings (allocated, not yet freed). A faster producer fills its rings,
 * a slower one leaves them part empty: the peak RSS of two allocators is
 * only comparable beside how much each had live, so the report gives it. */
static void watch_rings(size_t nrings, struct held *h)
{
  double end = bench_now() + cfg.seconds, now;
  while ((now = bench_now()) < end) {
    uint64_t n = 0;
    size_t i;
    bench_sleep(end - now < 0.001 ? end - now : 0.001);
    /* head before tail, head with acquire: the consumer moved head past
     * what it had read of tail, so the tail read after it is no older and
     * the difference never wraps */
    for (i = 0; i < nrings; i++) {
      size_t head = atomic_load_explicit(&rings[i].head, memory_order_acquire);
      n += atomic_load_explicit(&rings[i].tail, memory_order_acquire) - head;
    }
    h->samples++;
    h->sum += n;
    if (n > h->max)
      h->max = n;
  }
}

int main(int argc, char **argv)
{
  static const char about[] =
      "Issue 8, producer/consumer: --producers threads malloc blocks of random size\n"
      "in [--min, --max], stamp them and pass them through bounded rings (--ring\n"
      "entries per producer-consumer pair) to --consumers threads, which check and\n"
      "free them. Producers run for --seconds, consumers drain the rest. Reports ops\n"
      "(blocks handed over) and mops (millions per second); peak RSS matters too.";
  const bench_opt opts[] = {
      {"producers", BENCH_OPT_U64, &cfg.producers, 1, 512, "P", "allocating threads"},
      {"consumers", BENCH_OPT_U64, &cfg.consumers, 1, 512, "C", "freeing threads"},
      {"min", BENCH_OPT_U64, &cfg.min, 1, 1e12, "BYTES", "smallest block size"},
      {"max", BENCH_OPT_U64, &cfg.max, 1, 1e12, "BYTES", "largest block size"},
      {"ring", BENCH_OPT_U64, &cfg.ring, 1, 1 << 24, "N",
       "ring capacity per producer-consumer pair (rounded up to a power of 2)"},
      {"seconds", BENCH_OPT_DOUBLE, &cfg.seconds, 0.001, 3600, "S", "how long producers run"},
      BENCH_OPT_TOUCH(cfg.touch_name),
      {"seed", BENCH_OPT_U64, &cfg.seed, 0, 1.8e19, "N", "PRNG seed (producer i uses N+i)"},
      {"corrupt-test", BENCH_OPT_FLAG, &cfg.corrupt_test, 0, 0, NULL, NULL},
  };
  pthread_t *tids;
  struct worker *workers;
  uint64_t i, nthreads, produced = 0, consumed = 0;
  struct held held = {0, 0, 0};
  size_t cap = 1, nrings;
  double seconds;

  bench_parse(argc, argv, about, opts, sizeof opts / sizeof opts[0]);
  if (cfg.min > cfg.max)
    bench_usage_error(argv[0], "--min %llu is larger than --max %llu",
                      (unsigned long long)cfg.min, (unsigned long long)cfg.max);
  cfg.touch = bench_touch_option(argv[0], cfg.touch_name);
  while (cap < cfg.ring)
    cap <<= 1;
  ring_mask = cap - 1;

  nthreads = cfg.producers + cfg.consumers;
  nrings = (size_t)(cfg.producers * cfg.consumers);
  rings = (struct ring *)aligned_alloc(64, nrings * sizeof *rings);
  tids = (pthread_t *)calloc(nthreads, sizeof *tids);
  workers = (struct worker *)calloc(nthreads, sizeof *workers);
  if (!rings || !tids || !workers)
    bench_oom(TEST_NAME, nrings * sizeof *rings);
  for (i = 0; i < nrings; i++) {
    atomic_init(&rings[i].head, 0);
    atomic_init(&rings[i].tail, 0);
    rings[i].items = (struct item *)calloc(cap, sizeof *rings[i].items);
    if (!rings[i].items)
      bench_oom(TEST_NAME, cap * sizeof *rings[i].items);
  }
  for (i = 0; i < nthreads; i++)
    workers[i].index = i;

  pthread_barrier_init(&start_line, NULL, (unsigned)nthreads + 1);
  bench_spawn(tids, (size_t)cfg.producers, producer, workers, sizeof *workers);
  bench_spawn(tids + cfg.producers, (size_t)cfg.consumers, consumer, workers + cfg.producers,
              sizeof *workers);
  pthread_barrier_wait(&start_line);
  watch_rings(nrings, &held);
  atomic_store_explicit(&stop_flag, 1, memory_order_relaxed);
  bench_join(tids, (size_t)nthreads);

  for (i = 0; i < nthreads; i++) {
    if (i < cfg.producers)
      produced += workers[i].count;
    else
      consumed += workers[i].count;
  }
  if (produced != consumed)
    bench_die(BENCH_EXIT_CORRUPT, "CORRUPT test=%s: %llu blocks produced, %llu consumed",
              TEST_NAME, (unsigned long long)produced, (unsigned long long)consumed);
  seconds = bench_span_seconds(&workers[0].span, (size_t)nthreads, sizeof *workers);
  bench_result(TEST_NAME,
               "producers=%llu consumers=%llu min=%llu max=%llu ring=%llu touch=%s seed=%llu "
               "seconds=%.4f ops=%llu mops=%.4f held_mean=%.0f held_max=%llu",
               (unsigned long long)cfg.producers, (unsigned long long)cfg.consumers,
               (unsigned long long)cfg.min, (unsigned long long)cfg.max,
               (unsigned long long)cap, cfg.touch_name, (unsigned long long)cfg.seed, seconds,
               (unsigned long long)consumed, (double)consumed / seconds / 1e6,
               held.samples ? (double)held.sum / (double)held.samples : 0.0,
               (unsigned long long)held.max);
  pthread_barrier_destroy(&start_line);
  for (i = 0; i < nrings; i++)
    free(rings[i].items);
  free(rings);
  free(tids);
  free(workers);
  return BENCH_EXIT_OK;
}
