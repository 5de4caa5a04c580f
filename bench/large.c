/* large.c - the large-block loop (issue 8): blocks of 256 KiB to 32 MiB,
 * allocated, written page by page, checked and freed.
 *
 * Each of --threads threads keeps a few large blocks (about --live, the
 * slot walk of common.h over 2 x --live slots) and runs --ops steps, one
 * malloc or one free each. Sizes are log-uniform in [--min, --max] by
 * default (as many blocks of 256-512 KiB as of 16-32 MiB; mean about
 * 6.5 MiB), or uniform with --dist uniform. Every new block is written on
 * every page (--touch pages: the first and last 8 bytes and one byte per
 * 4 KiB, checked before free; --touch all writes every byte), as a program
 * filling a buffer would: an allocator that unmaps and maps again pays the
 * page faults, one that keeps memory around pays in peak RSS.
 *
 * seconds is the wall time of the steps (fill and teardown excluded),
 * mops millions of steps per second, gib the GiB of blocks allocated in the
 * timed steps; peak RSS is the other half of the result.
 */
#include "common.h"

#include <math.h>

#define TEST_NAME "large"

static struct {
  uint64_t threads, live, ops, min, max, seed, corrupt_test;
  const char *touch_name, *dist_name;
  enum bench_touch touch;
  int log_dist;
} cfg = {1, 4, 2000, 262144, 33554432, 1, 0, "pages", "log", BENCH_TOUCH_PAGES, 1};

static pthread_barrier_t start_line, stop_line;

/* One per thread; read by the main thread after join. */
struct worker {
  struct bench_span span;
  uint64_t index;
  uint64_t bytes; /* allocated in the timed steps */
};

static size_t large_size(bench_rng *rng)
{
  double u;
  if (!cfg.log_dist || cfg.min == cfg.max)
    return (size_t)bench_rng_range(rng, cfg.min, cfg.max);
  /* 53 random bits in [0, 1), then min * (max/min)^u. */
  u = (double)(bench_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
  return (size_t)((double)cfg.min * exp(u * log((double)cfg.max / (double)cfg.min)));
}

static void *large_worker(void *arg)
{
  struct worker *w = (struct worker *)arg;
  size_t nslots = 2 * (size_t)cfg.live, k;
  void **slot = (void **)calloc(nslots, sizeof *slot);
  size_t *size = (size_t *)calloc(nslots, sizeof *size);
  uint64_t op, bytes = 0;
  bench_rng rng;

  if (!slot || !size)
    bench_oom(TEST_NAME, nslots * sizeof *slot);
  bench_rng_init(&rng, cfg.seed + w->index);
  for (k = 0; k < cfg.live; k++)
    bench_slot_fill(TEST_NAME, slot, size, k, large_size(&rng), cfg.touch);

  pthread_barrier_wait(&start_line);
  w->span.start = bench_now();
  for (op = 0; op < cfg.ops; op++) {
    k = (size_t)bench_rng_below(&rng, nslots);
    if (slot[k]) {
      /* --corrupt-test: thread 0 damages a middle page of the first block
       * it frees after 10 steps (only a page-by-page check sees it). */
      if (w->index == 0 && cfg.corrupt_test && op >= 10) {
        ((unsigned char *)slot[k])[size[k] / 2 / 4096 * 4096] ^= 0x5a;
        cfg.corrupt_test = 0;
      }
      bench_slot_release(TEST_NAME, slot, size, k, cfg.touch);
    } else {
      size_t n = large_size(&rng);
      bench_slot_fill(TEST_NAME, slot, size, k, n, cfg.touch);
      bytes += n;
    }
  }
  w->span.end = bench_now();
  w->bytes = bytes;
  pthread_barrier_wait(&stop_line);

  bench_slots_free(TEST_NAME, slot, size, nslots, cfg.touch);
  return NULL;
}

int main(int argc, char **argv)
{
  static const char about[] =
      "Issue 8, large-block loop: each of --threads threads keeps about --live blocks\n"
      "of --min to --max bytes (log-uniform, or --dist uniform), and runs --ops steps,\n"
      "each one malloc (the block written on every page) or one free (checked) at a\n"
      "random one of 2 x --live slots. Reports seconds (the steps), mops and gib\n"
      "(GiB allocated in the steps); peak RSS.";
  const bench_opt opts[] = {
      {"threads", BENCH_OPT_U64, &cfg.threads, 1, 1024, "T", "worker threads"},
      {"live", BENCH_OPT_U64, &cfg.live, 1, 1e6, "K", "live blocks per thread (about)"},
      {"ops", BENCH_OPT_U64, &cfg.ops, 0, 1e12, "N", "steps per thread (one malloc or free each)"},
      {"min", BENCH_OPT_U64, &cfg.min, 1, 1e12, "BYTES", "smallest block"},
      {"max", BENCH_OPT_U64, &cfg.max, 1, 1e12, "BYTES", "largest block"},
      {"dist", BENCH_OPT_STR, &cfg.dist_name, 0, 0, "log|uniform", "size distribution"},
      BENCH_OPT_TOUCH(cfg.touch_name),
      {"seed", BENCH_OPT_U64, &cfg.seed, 0, 1.8e19, "N", "PRNG seed (thread i uses N+i)"},
      {"corrupt-test", BENCH_OPT_FLAG, &cfg.corrupt_test, 0, 0, NULL, NULL},
  };
  pthread_t *tids;
  struct worker *workers;
  double seconds;
  uint64_t i, bytes = 0;

  bench_parse(argc, argv, about, opts, sizeof opts / sizeof opts[0]);
  if (cfg.min > cfg.max)
    bench_usage_error(argv[0], "--min is larger than --max");
  cfg.touch = bench_touch_option(argv[0], cfg.touch_name);
  if (strcmp(cfg.dist_name, "log") == 0)
    cfg.log_dist = 1;
  else if (strcmp(cfg.dist_name, "uniform") == 0)
    cfg.log_dist = 0;
  else
    bench_usage_error(argv[0], "--dist must be log or uniform");

  tids = (pthread_t *)calloc(cfg.threads, sizeof *tids);
  workers = (struct worker *)calloc(cfg.threads, sizeof *workers);
  if (!tids || !workers)
    bench_oom(TEST_NAME, cfg.threads * sizeof *workers);
  for (i = 0; i < cfg.threads; i++)
    workers[i].index = i;
  pthread_barrier_init(&start_line, NULL, (unsigned)cfg.threads + 1);
  pthread_barrier_init(&stop_line, NULL, (unsigned)cfg.threads + 1);
  bench_spawn(tids, cfg.threads, large_worker, workers, sizeof *workers);
  pthread_barrier_wait(&start_line);
  pthread_barrier_wait(&stop_line);
  bench_join(tids, cfg.threads);
  for (i = 0; i < cfg.threads; i++)
    bytes += workers[i].bytes;
  seconds = bench_span_seconds(&workers[0].span, cfg.threads, sizeof *workers);

  bench_result(TEST_NAME,
               "threads=%llu live=%llu ops=%llu min=%llu max=%llu dist=%s touch=%s seed=%llu "
               "seconds=%.4f mops=%.4f gib=%.3f",
               (unsigned long long)cfg.threads, (unsigned long long)cfg.live,
               (unsigned long long)cfg.ops, (unsigned long long)cfg.min,
               (unsigned long long)cfg.max, cfg.dist_name, cfg.touch_name,
               (unsigned long long)cfg.seed, seconds,
               (double)(cfg.ops * cfg.threads) / seconds / 1e6, (double)bytes / 1073741824.0);
  pthread_barrier_destroy(&start_line);
  pthread_barrier_destroy(&stop_line);
  free(tids);
  free(workers);
  return BENCH_EXIT_OK;
}
