/* churn.c - the churn surface (seed 000, BigBrain 2020) and its working-set
 * axis (issue 8).
 *
 * The seed's test "bashes the memory manager with repeated GetMem and
 * FreeMem calls of random sizes. Each thread runs for 8 seconds, and at the
 * end [it sums] the number of iterations that each thread was able to
 * complete", for 1..64 threads and block-size bands from tiny to 256 KiB.
 *
 * Each thread keeps about --live blocks of uniform random size in [--min,
 * --max], stamped after malloc and checked before free (first and last 8
 * bytes by default, see bench_stamp). Two patterns:
 *
 *   steps (default, what bench/run.py runs): the slot walk of common.h over
 *     2 x --live slots, half filled at the start; one step is one malloc or
 *     one free at a random slot, so the heap holds about threads x live
 *     blocks, freed in random order. This is a working-set test: with a
 *     live set of thousands of blocks the allocator's free lists, pages and
 *     caches see the traffic of a real program, not the same block coming
 *     back on every call.
 *   pairs (the seed's shape, issue 2's numbers): --live slots, all filled;
 *     one step frees a random slot's block and at once mallocs a new one
 *     into it, so every free is followed by a malloc.
 *
 * ops counts malloc/free pairs (pairs: steps; steps: calls / 2) summed over
 * threads; mops is millions of pairs per second of wall time, so both
 * patterns report in the same unit.
 *
 * Threads fill their slots, warm up (--warmup x slots untimed steps, so the
 * timed loop starts from a mixed heap with its pages faulted in), meet at a
 * barrier, then run until the main thread raises the stop flag --seconds
 * later. During the timed loop a thread touches only its own slots, its own
 * PRNG and the stop flag, which is written once, so nothing but the
 * allocator is shared between threads.
 */
#include "common.h"

#include <stdatomic.h>

#define TEST_NAME "churn"

enum churn_pattern { CHURN_STEPS, CHURN_PAIRS };

static struct {
  uint64_t threads, min, max, live, warmup, seed, corrupt_test;
  double seconds;
  const char *touch_name, *pattern_name;
  enum bench_touch touch;
  enum churn_pattern pattern;
} cfg = {1, 8, 512, 64, 1, 1, 0, 1.0, "ends", "steps", BENCH_TOUCH_ENDS, CHURN_STEPS};

/* Written by the main thread once (relaxed is enough: it only has to be
 * seen eventually, and the workers publish their results through join). */
static atomic_int stop_flag;
static pthread_barrier_t start_line;

/* One per thread, written by its worker only; the main thread reads it
 * after join. */
struct worker {
  struct bench_span span;
  uint64_t index;
  uint64_t ops;     /* pairs */
  uint64_t calls;   /* malloc and free calls */
  int timed;        /* in the timed loop (not the warm-up) */
  int damaged;      /* --corrupt-test done */
};

/* --corrupt-test: thread 0 damages the last byte of the block it is about
 * to check, once, at its first free after 100 steps, to prove that the
 * check catches it. */
static void churn_maybe_damage(struct worker *w, uint64_t step, void *p, size_t n)
{
  if (cfg.corrupt_test && w->index == 0 && w->timed && step >= 100 && !w->damaged) {
    ((unsigned char *)p)[n - 1] ^= 0x5a;
    w->damaged = 1;
  }
}

/* The loops run until the stop flag, or for at least `limit` steps when it
 * is not 0 (the warm-up). */
static int churn_done(uint64_t steps, uint64_t limit)
{
  if (limit)
    return steps >= limit;
  return atomic_load_explicit(&stop_flag, memory_order_relaxed);
}

/* The seed's loop: free a random slot's block, malloc a new one into it. */
static uint64_t churn_pairs(struct worker *w, void **slot, size_t *size, size_t live,
                            bench_rng *rng, uint64_t limit)
{
  uint64_t ops = 0;
  while (!churn_done(ops, limit)) {
    size_t n = (size_t)bench_rng_range(rng, cfg.min, cfg.max);
    size_t k = (size_t)bench_rng_below(rng, live);
    churn_maybe_damage(w, ops, slot[k], size[k]);
    bench_slot_release(TEST_NAME, slot, size, k, cfg.touch);
    bench_slot_fill(TEST_NAME, slot, size, k, n, cfg.touch);
    ops++;
  }
  return ops;
}

/* The slot walk: one malloc or one free per step over 2 x live slots. The
 * stop flag is read every 16 steps (steps are cheaper than pairs). */
static uint64_t churn_steps(struct worker *w, void **slot, size_t *size, size_t nslots,
                            bench_rng *rng, uint64_t limit)
{
  uint64_t calls = 0;
  while (!churn_done(calls, limit)) {
    int i;
    for (i = 0; i < 16; i++) {
      size_t k = (size_t)bench_rng_below(rng, nslots);
      if (slot[k]) {
        churn_maybe_damage(w, calls, slot[k], size[k]);
        bench_slot_release(TEST_NAME, slot, size, k, cfg.touch);
      } else {
        size_t n = (size_t)bench_rng_range(rng, cfg.min, cfg.max);
        bench_slot_fill(TEST_NAME, slot, size, k, n, cfg.touch);
      }
      calls++;
    }
  }
  return calls;
}

static void *churn_worker(void *arg)
{
  struct worker *w = (struct worker *)arg;
  size_t live = (size_t)cfg.live, k;
  size_t nslots = cfg.pattern == CHURN_STEPS ? 2 * live : live;
  void **slot = (void **)calloc(nslots, sizeof *slot);
  size_t *size = (size_t *)calloc(nslots, sizeof *size);
  bench_rng rng;

  if (!slot || !size)
    bench_oom(TEST_NAME, nslots * sizeof *slot);
  bench_rng_init(&rng, cfg.seed + w->index);
  for (k = 0; k < live; k++)
    bench_slot_fill(TEST_NAME, slot, size, k,
                    (size_t)bench_rng_range(&rng, cfg.min, cfg.max), cfg.touch);
  /* Untimed warm-up, --warmup x slots steps: the blocks filled in order
   * are replaced in random order, so the timed loop starts from a heap in
   * its steady state, every page of the working set already faulted in. */
  if (cfg.warmup) {
    if (cfg.pattern == CHURN_PAIRS)
      churn_pairs(w, slot, size, live, &rng, cfg.warmup * nslots);
    else
      churn_steps(w, slot, size, nslots, &rng, cfg.warmup * nslots);
  }

  pthread_barrier_wait(&start_line);
  w->timed = 1;
  w->span.start = bench_now();
  if (cfg.pattern == CHURN_PAIRS) {
    w->ops = churn_pairs(w, slot, size, live, &rng, 0);
    w->calls = 2 * w->ops;
  } else {
    w->calls = churn_steps(w, slot, size, nslots, &rng, 0);
    w->ops = w->calls / 2;
  }
  w->span.end = bench_now();

  bench_slots_free(TEST_NAME, slot, size, nslots, cfg.touch);
  return NULL;
}

int main(int argc, char **argv)
{
  static const char about[] =
      "Seed 000 (BigBrain 2020) churn surface with a working-set axis: for --seconds\n"
      "each thread mallocs and frees blocks of random size in [--min, --max] bytes,\n"
      "keeping about --live of them, and checks each block's stamp before it is\n"
      "freed. --pattern steps: one malloc or free per step at a random one of\n"
      "2 x --live slots (half live); pairs: the seed's free + malloc into a random\n"
      "one of --live slots. Reports ops (malloc/free pairs, summed over threads),\n"
      "calls and mops (million pairs per second).";
  const bench_opt opts[] = {
      {"threads", BENCH_OPT_U64, &cfg.threads, 1, 1024, "T", "worker threads"},
      {"min", BENCH_OPT_U64, &cfg.min, 1, 1e12, "BYTES", "smallest block size"},
      {"max", BENCH_OPT_U64, &cfg.max, 1, 1e12, "BYTES", "largest block size"},
      {"seconds", BENCH_OPT_DOUBLE, &cfg.seconds, 0.001, 3600, "S", "timed run length"},
      {"live", BENCH_OPT_U64, &cfg.live, 1, 1e8, "K", "live blocks per thread (about)"},
      {"warmup", BENCH_OPT_U64, &cfg.warmup, 0, 1000, "R",
       "untimed steps before the clock starts, in multiples of the slot count"},
      {"pattern", BENCH_OPT_STR, &cfg.pattern_name, 0, 0, "steps|pairs",
       "one malloc or free per step, or free + malloc pairs"},
      BENCH_OPT_TOUCH(cfg.touch_name),
      {"seed", BENCH_OPT_U64, &cfg.seed, 0, 1.8e19, "N", "PRNG seed (thread i uses N+i)"},
      {"corrupt-test", BENCH_OPT_FLAG, &cfg.corrupt_test, 0, 0, NULL, NULL},
  };
  pthread_t *tids;
  struct worker *workers;
  double seconds;
  uint64_t ops = 0, calls = 0, i;

  bench_parse(argc, argv, about, opts, sizeof opts / sizeof opts[0]);
  if (cfg.min > cfg.max)
    bench_usage_error(argv[0], "--min %llu is larger than --max %llu",
                      (unsigned long long)cfg.min, (unsigned long long)cfg.max);
  cfg.touch = bench_touch_option(argv[0], cfg.touch_name);
  if (strcmp(cfg.pattern_name, "steps") == 0)
    cfg.pattern = CHURN_STEPS;
  else if (strcmp(cfg.pattern_name, "pairs") == 0)
    cfg.pattern = CHURN_PAIRS;
  else
    bench_usage_error(argv[0], "--pattern must be steps or pairs");

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

  for (i = 0; i < cfg.threads; i++) {
    ops += workers[i].ops;
    calls += workers[i].calls;
  }
  seconds = bench_span_seconds(&workers[0].span, cfg.threads, sizeof *workers);
  bench_result(TEST_NAME,
               "threads=%llu min=%llu max=%llu live=%llu warmup=%llu pattern=%s touch=%s seed=%llu "
               "seconds=%.4f ops=%llu calls=%llu mops=%.4f",
               (unsigned long long)cfg.threads, (unsigned long long)cfg.min,
               (unsigned long long)cfg.max, (unsigned long long)cfg.live,
               (unsigned long long)cfg.warmup, cfg.pattern_name,
               cfg.touch_name, (unsigned long long)cfg.seed, seconds, (unsigned long long)ops,
               (unsigned long long)calls, (double)ops / seconds / 1e6);
  pthread_barrier_destroy(&start_line);
  free(tids);
  free(workers);
  return BENCH_EXIT_OK;
}
