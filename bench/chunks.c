/* chunks.c - malloc/free speed by chunk-size range (seed 002, "Testing
 * memory operations speed (malloc & free)").
 *
 * The seed's table: chunk sizes 256 B -> 512 B with 4 threads x 10M ops,
 * -> 2 KiB 8 x 5M, -> 32 KiB 10 x 1M, -> 128 KiB 12 x 200k, -> 512 KiB
 * 14 x 50k, -> 2 MiB 16 x 20k; time in ms for the whole run.
 *
 * Each of --threads threads does --ops operations. One operation picks a
 * random slot of the thread's --live slots, checks and frees the block in it
 * and mallocs a new one of uniform random size in [--min, --max] (a
 * malloc/free pair, as in churn; the seed does not say whether its "op" was
 * a pair or a single call, and a pair keeps the heap at a steady size). The
 * slots are filled before the start barrier and emptied after the clock
 * stops. Unlike churn the work is fixed and the time is measured, as in the
 * seed. Reports seconds of wall time and mops (million pairs per second).
 */
#include "common.h"

#define TEST_NAME "chunks"

static struct {
  uint64_t threads, min, max, ops, live, seed;
  const char *touch_name;
  enum bench_touch touch;
} cfg = {8, 256, 2048, 5000000, 64, 1, "ends", BENCH_TOUCH_ENDS};

static pthread_barrier_t start_line, stop_line;

struct worker {
  struct bench_span span;
  uint64_t index;
};

static void *chunks_worker(void *arg)
{
  struct worker *w = (struct worker *)arg;
  size_t live = (size_t)cfg.live, k;
  void **slot = (void **)malloc(live * sizeof *slot);
  size_t *size = (size_t *)malloc(live * sizeof *size);
  uint64_t op;
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
  for (op = 0; op < cfg.ops; op++) {
    size_t n = (size_t)bench_rng_range(&rng, cfg.min, cfg.max);
    void *p;
    k = (size_t)bench_rng_below(&rng, live);
    if (!bench_stamp_ok(slot[k], size[k], cfg.touch))
      bench_corrupt(TEST_NAME, slot[k], size[k], "stamp damaged before free");
    free(slot[k]);
    p = malloc(n);
    if (!p)
      bench_oom(TEST_NAME, n);
    bench_stamp(p, n, cfg.touch);
    slot[k] = p;
    size[k] = n;
  }
  w->span.end = bench_now();
  /* Nobody frees its slots while another thread is still timed. */
  pthread_barrier_wait(&stop_line);

  bench_slots_free(TEST_NAME, slot, size, live, cfg.touch);
  return NULL;
}

int main(int argc, char **argv)
{
  static const char about[] =
      "Seed 002, chunk-size speed: each of --threads threads does --ops malloc/free\n"
      "pairs of uniform random size in [--min, --max] over --live slots. Reports the\n"
      "wall time (seconds) and mops (million pairs per second, all threads).\n"
      "Seed cells: 256-512 4x10000000, 256-2048 8x5000000, 256-32768 10x1000000,\n"
      "256-131072 12x200000, 256-524288 14x50000, 256-2097152 16x20000.";
  const bench_opt opts[] = {
      {"min", BENCH_OPT_U64, &cfg.min, 1, 1e12, "BYTES", "smallest chunk"},
      {"max", BENCH_OPT_U64, &cfg.max, 1, 1e12, "BYTES", "largest chunk"},
      {"threads", BENCH_OPT_U64, &cfg.threads, 1, 1024, "T", "worker threads"},
      {"ops", BENCH_OPT_U64, &cfg.ops, 1, 1e12, "N", "malloc/free pairs per thread"},
      {"live", BENCH_OPT_U64, &cfg.live, 1, 1e8, "K", "live blocks per thread"},
      BENCH_OPT_TOUCH(cfg.touch_name),
      {"seed", BENCH_OPT_U64, &cfg.seed, 0, 1.8e19, "N", "PRNG seed (thread i uses N+i)"},
  };
  pthread_t *tids;
  struct worker *workers;
  double seconds;
  uint64_t i;

  bench_parse(argc, argv, about, opts, sizeof opts / sizeof opts[0]);
  if (cfg.min > cfg.max)
    bench_usage_error(argv[0], "--min is larger than --max");
  cfg.touch = bench_touch_option(argv[0], cfg.touch_name);

  tids = (pthread_t *)calloc(cfg.threads, sizeof *tids);
  workers = (struct worker *)calloc(cfg.threads, sizeof *workers);
  if (!tids || !workers)
    bench_oom(TEST_NAME, cfg.threads * sizeof *workers);
  for (i = 0; i < cfg.threads; i++)
    workers[i].index = i;
  pthread_barrier_init(&start_line, NULL, (unsigned)cfg.threads + 1);
  pthread_barrier_init(&stop_line, NULL, (unsigned)cfg.threads + 1);
  bench_spawn(tids, cfg.threads, chunks_worker, workers, sizeof *workers);
  pthread_barrier_wait(&start_line);
  pthread_barrier_wait(&stop_line);
  bench_join(tids, cfg.threads);
  seconds = bench_span_seconds(&workers[0].span, cfg.threads, sizeof *workers);

  bench_result(TEST_NAME,
               "threads=%llu min=%llu max=%llu ops=%llu live=%llu touch=%s seed=%llu "
               "total_ops=%llu seconds=%.4f mops=%.4f",
               (unsigned long long)cfg.threads, (unsigned long long)cfg.min,
               (unsigned long long)cfg.max, (unsigned long long)cfg.ops,
               (unsigned long long)cfg.live, cfg.touch_name, (unsigned long long)cfg.seed,
               (unsigned long long)(cfg.ops * cfg.threads), seconds,
               (double)(cfg.ops * cfg.threads) / seconds / 1e6);
  pthread_barrier_destroy(&start_line);
  pthread_barrier_destroy(&stop_line);
  free(tids);
  free(workers);
  return BENCH_EXIT_OK;
}
