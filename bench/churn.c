/* churn.c - the churn surface (seed 000, BigBrain 2020).
 *
 * The seed's test "bashes the memory manager with repeated GetMem and
 * FreeMem calls of random sizes. Each thread runs for 8 seconds, and at the
 * end [it sums] the number of iterations that each thread was able to
 * complete", for 1..64 threads and block-size bands from tiny to 256 KiB.
 *
 * Here each thread owns an array of --live slots, each holding a live block.
 * One step frees a random slot's block (after checking its stamp) and
 * mallocs a block of uniform random size in [--min, --max] into that slot,
 * stamping it (first and last 8 bytes by default, see bench_stamp). So the
 * heap always holds threads * live blocks and every step is one malloc/free
 * pair; ops counts pairs, mops is millions of pairs per second of wall time.
 *
 * Threads fill their slots, meet at a barrier, then run until the main
 * thread raises the stop flag --seconds later. During the timed loop a
 * thread touches only its own slots, its own PRNG and the stop flag, which
 * is written once, so nothing but the allocator is shared between threads.
 */
#include "common.h"

#include <stdatomic.h>

#define TEST_NAME "churn"

static struct {
  uint64_t threads, min, max, live, seed, corrupt_test;
  double seconds;
  const char *touch_name;
  enum bench_touch touch;
} cfg = {1, 8, 512, 64, 1, 0, 1.0, "ends", BENCH_TOUCH_ENDS};

/* Written by the main thread once (relaxed is enough: it only has to be
 * seen eventually, and the workers publish their results through join). */
static atomic_int stop_flag;
static pthread_barrier_t start_line;

/* One per thread; a worker writes its own entry only after its timed loop,
 * and the main thread reads it after join. */
struct worker {
  struct bench_span span;
  uint64_t index;
  uint64_t ops;
};

static void *churn_worker(void *arg)
{
  struct worker *w = (struct worker *)arg;
  size_t live = (size_t)cfg.live, k;
  void **slot = (void **)malloc(live * sizeof *slot);
  size_t *size = (size_t *)malloc(live * sizeof *size);
  uint64_t ops = 0;
  bench_rng rng;

  if (!slot || !size)
    bench_oom(TEST_NAME, live * sizeof *slot);
  bench_rng_init(&rng, cfg.seed + w->index);
  for (k = 0; k < live; k++) {
    size[k] = (size_t)bench_rng_range(&rng, cfg.min, cfg.max);
    slot[k] = malloc(size[k]);
    if (!slot[k])
      bench_oom(TEST_NAME, size[k]);
    bench_stamp(slot[k], size[k], cfg.touch);
  }

  pthread_barrier_wait(&start_line);
  w->span.start = bench_now();
  while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
    size_t n = (size_t)bench_rng_range(&rng, cfg.min, cfg.max);
    void *p;
    k = (size_t)bench_rng_below(&rng, live);
    /* --corrupt-test: thread 0 damages the last byte of the block it is
     * about to check, once, to prove that the check below catches it. */
    if (cfg.corrupt_test && w->index == 0 && ops == 100)
      ((unsigned char *)slot[k])[size[k] - 1] ^= 0x5a;
    if (!bench_stamp_ok(slot[k], size[k], cfg.touch))
      bench_corrupt(TEST_NAME, slot[k], size[k], "stamp damaged before free");
    free(slot[k]);
    p = malloc(n);
    if (!p)
      bench_oom(TEST_NAME, n);
    bench_stamp(p, n, cfg.touch);
    slot[k] = p;
    size[k] = n;
    ops++;
  }
  w->span.end = bench_now();
  w->ops = ops;

  bench_slots_free(TEST_NAME, slot, size, live, cfg.touch);
  return NULL;
}

int main(int argc, char **argv)
{
  static const char about[] =
      "Seed 000 (BigBrain 2020) churn surface: each thread keeps --live blocks and\n"
      "for --seconds replaces a random one with a new block of random size in\n"
      "[--min, --max] bytes (free + malloc = one op), checking each block's stamp\n"
      "before it is freed. Reports ops (pairs, summed over threads) and mops\n"
      "(million pairs per second).";
  const bench_opt opts[] = {
      {"threads", BENCH_OPT_U64, &cfg.threads, 1, 1024, "T", "worker threads"},
      {"min", BENCH_OPT_U64, &cfg.min, 1, 1e12, "BYTES", "smallest block size"},
      {"max", BENCH_OPT_U64, &cfg.max, 1, 1e12, "BYTES", "largest block size"},
      {"seconds", BENCH_OPT_DOUBLE, &cfg.seconds, 0.001, 3600, "S", "timed run length"},
      {"live", BENCH_OPT_U64, &cfg.live, 1, 1e8, "K", "live blocks per thread"},
      {"touch", BENCH_OPT_STR, &cfg.touch_name, 0, 0, "ends|pages|all",
       "how much of each block is stamped and checked"},
      {"seed", BENCH_OPT_U64, &cfg.seed, 0, 1.8e19, "N", "PRNG seed (thread i uses N+i)"},
      {"corrupt-test", BENCH_OPT_FLAG, &cfg.corrupt_test, 0, 0, NULL, NULL},
  };
  pthread_t *tids;
  struct worker *workers;
  double seconds;
  uint64_t ops = 0, i;

  bench_parse(argc, argv, about, opts, sizeof opts / sizeof opts[0]);
  if (cfg.min > cfg.max)
    bench_usage_error(argv[0], "--min %llu is larger than --max %llu",
                      (unsigned long long)cfg.min, (unsigned long long)cfg.max);
  if (bench_touch_parse(cfg.touch_name, &cfg.touch) != 0)
    bench_usage_error(argv[0], "--touch must be ends, pages or all");

  tids = (pthread_t *)calloc(cfg.threads, sizeof *tids);
  workers = (struct worker *)calloc(cfg.threads, sizeof *workers);
  if (!tids || !workers)
    bench_oom(TEST_NAME, cfg.threads * sizeof *workers);
  for (i = 0; i < cfg.threads; i++)
    workers[i].index = i;
  pthread_barrier_init(&start_line, NULL, (unsigned)cfg.threads + 1);
  bench_spawn(tids, cfg.threads, churn_worker, workers, sizeof *workers);

  pthread_barrier_wait(&start_line);
  bench_sleep(cfg.seconds);
  atomic_store_explicit(&stop_flag, 1, memory_order_relaxed);
  bench_join(tids, cfg.threads);

  for (i = 0; i < cfg.threads; i++)
    ops += workers[i].ops;
  seconds = bench_span_seconds(&workers[0].span, cfg.threads, sizeof *workers);
  bench_result(TEST_NAME,
               "threads=%llu min=%llu max=%llu live=%llu touch=%s seed=%llu "
               "seconds=%.4f ops=%llu mops=%.4f",
               (unsigned long long)cfg.threads, (unsigned long long)cfg.min,
               (unsigned long long)cfg.max, (unsigned long long)cfg.live, cfg.touch_name,
               (unsigned long long)cfg.seed, seconds, (unsigned long long)ops,
               (double)ops / seconds / 1e6);
  pthread_barrier_destroy(&start_line);
  free(tids);
  free(workers);
  return BENCH_EXIT_OK;
}
