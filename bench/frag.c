/* frag.c - robustness against fragmentation (seed 002, "Testing robustness
 * of the memory managers vs memory fragmentation (allocate without
 * deallocation)"). Built twice: frag (native) and, where the toolchain can,
 * frag32 (-m32), since the seed's point was the 32-bit CRT heap failing to
 * find 8 MB "despite 1.2GB theoretically available" after a few loops.
 *
 * The seed's cells: 2 threads x 2M pointers of 128 B -> 256 B (~750 MB),
 * 4 x 800k of 128 -> 512, 8 x 200k of 128 -> 1 KiB, 10 x 50k of 128 ->
 * 1.25 KiB, 12 x 15k of 128 -> 1.5 KiB (and a half-size series "far from
 * the 2 GB limit"); time in ms per loop, and whether an 8 MB chunk could
 * still be had.
 *
 * One loop:
 *   1. every thread mallocs --pointers blocks of uniform random size in
 *      [--min, --max] and stamps them, freeing none (timed: seconds);
 *   2. with --holes 1, every thread frees every other one of its blocks,
 *      punching holes all over the heap;
 *   3. the main thread asks for one --big block (8 MiB) and writes all of
 *      it (big_ok says whether every loop got it);
 *   4. every thread checks and frees the rest (timed: free_s).
 * --loops repeats this on the same threads. A failed small malloc is not an
 * error here: that thread stops allocating for the loop and small_fail
 * counts it, since running out is the outcome this test looks for.
 */
#include "common.h"

static struct {
  uint64_t threads, pointers, min, max, holes, big, loops, seed;
} cfg = {2, 500000, 128, 1536, 0, 8388608, 1, 1};

static const char *test_name;
/* Reused for every phase: the workers and the main thread wait on it
 * between phases in the same order. */
static pthread_barrier_t phase;

/* One per thread. The worker writes its spans during a loop and the main
 * thread reads them after the barrier that ends the phase; small_fail and
 * bytes are read after join. */
struct worker {
  struct bench_span alloc_span, free_span;
  uint64_t index;
  uint64_t small_fail;
  uint64_t bytes_first_loop;
};

static void *frag_worker(void *arg)
{
  struct worker *w = (struct worker *)arg;
  size_t n = (size_t)cfg.pointers, j, count;
  void **ptr = (void **)calloc(n, sizeof *ptr);
  uint32_t *size = (uint32_t *)calloc(n, sizeof *size);
  uint64_t loop;
  bench_rng rng;

  if (!ptr || !size)
    bench_oom(test_name, n * sizeof *ptr);
  bench_rng_init(&rng, cfg.seed + w->index);
  for (loop = 0; loop < cfg.loops; loop++) {
    pthread_barrier_wait(&phase); /* 1: allocate */
    w->alloc_span.start = bench_now();
    for (count = 0; count < n; count++) {
      size_t sz = (size_t)bench_rng_range(&rng, cfg.min, cfg.max);
      void *p = malloc(sz);
      if (!p) {
        w->small_fail++;
        break;
      }
      bench_stamp(p, sz, BENCH_TOUCH_ENDS);
      ptr[count] = p;
      size[count] = (uint32_t)sz;
      if (loop == 0)
        w->bytes_first_loop += sz;
    }
    w->alloc_span.end = bench_now();
    pthread_barrier_wait(&phase); /* 2: punch holes */
    if (cfg.holes) {
      for (j = 1; j < count; j += 2) {
        if (!bench_stamp_ok(ptr[j], size[j], BENCH_TOUCH_ENDS))
          bench_corrupt(test_name, ptr[j], size[j], "stamp damaged before free");
        free(ptr[j]);
        ptr[j] = NULL;
      }
    }
    pthread_barrier_wait(&phase); /* 3: the main thread's big block */
    pthread_barrier_wait(&phase); /* 4: free the rest */
    w->free_span.start = bench_now();
    for (j = 0; j < count; j++) {
      if (!ptr[j])
        continue;
      if (!bench_stamp_ok(ptr[j], size[j], BENCH_TOUCH_ENDS))
        bench_corrupt(test_name, ptr[j], size[j], "stamp damaged before free");
      free(ptr[j]);
      ptr[j] = NULL;
    }
    w->free_span.end = bench_now();
    pthread_barrier_wait(&phase); /* end of loop */
  }
  free(ptr);
  free(size);
  return NULL;
}

int main(int argc, char **argv)
{
  static const char about[] =
      "Seed 002, fragmentation: --threads threads each malloc --pointers blocks of\n"
      "[--min, --max] bytes without freeing, optionally (--holes 1) free every other\n"
      "one, then one --big block is requested and written in full; the rest is\n"
      "freed; repeated --loops times. Reports seconds (allocation phases, summed;\n"
      "loop_s is their mean, the seed's figure), free_s, big_ok (1 when every big\n"
      "request succeeded), big_fail and small_fail (loops x threads cut short).";
  const bench_opt opts[] = {
      {"threads", BENCH_OPT_U64, &cfg.threads, 1, 1024, "T", "allocating threads"},
      {"pointers", BENCH_OPT_U64, &cfg.pointers, 1, 1e9, "N", "blocks per thread per loop"},
      {"min", BENCH_OPT_U64, &cfg.min, 1, 1e9, "BYTES", "smallest block"},
      {"max", BENCH_OPT_U64, &cfg.max, 1, 1e9, "BYTES", "largest block"},
      {"holes", BENCH_OPT_U64, &cfg.holes, 0, 1, "0|1", "free every other block before the big one"},
      {"big", BENCH_OPT_U64, &cfg.big, 1, 1e12, "BYTES", "size of the big request"},
      {"loops", BENCH_OPT_U64, &cfg.loops, 1, 1e6, "L", "repetitions"},
      {"seed", BENCH_OPT_U64, &cfg.seed, 0, 1.8e19, "N", "PRNG seed (thread i uses N+i)"},
  };
  pthread_t *tids;
  struct worker *workers;
  double alloc_s = 0, free_s = 0, big_s = 0, t;
  uint64_t loop, i, big_fail = 0, small_fail = 0, bytes = 0;

  test_name = sizeof(void *) == 4 ? "frag32" : "frag";
  bench_parse(argc, argv, about, opts, sizeof opts / sizeof opts[0]);
  if (cfg.min > cfg.max)
    bench_usage_error(argv[0], "--min is larger than --max");
  if (cfg.big > (uint64_t)(size_t)-1)
    bench_usage_error(argv[0], "--big does not fit in this build's size_t");

  tids = (pthread_t *)calloc(cfg.threads, sizeof *tids);
  workers = (struct worker *)calloc(cfg.threads, sizeof *workers);
  if (!tids || !workers)
    bench_oom(test_name, cfg.threads * sizeof *workers);
  for (i = 0; i < cfg.threads; i++)
    workers[i].index = i;
  pthread_barrier_init(&phase, NULL, (unsigned)cfg.threads + 1);
  bench_spawn(tids, cfg.threads, frag_worker, workers, sizeof *workers);

  for (loop = 0; loop < cfg.loops; loop++) {
    void *big;
    pthread_barrier_wait(&phase); /* 1: allocate */
    pthread_barrier_wait(&phase); /* 2: punch holes */
    alloc_s += bench_span_seconds(&workers[0].alloc_span, cfg.threads, sizeof *workers);
    pthread_barrier_wait(&phase); /* 3: big block */
    t = bench_now();
    big = malloc((size_t)cfg.big);
    if (big) {
      bench_stamp(big, (size_t)cfg.big, BENCH_TOUCH_ALL);
      if (!bench_stamp_ok(big, (size_t)cfg.big, BENCH_TOUCH_ALL))
        bench_corrupt(test_name, big, (size_t)cfg.big, "big block does not hold its contents");
      free(big);
    } else {
      big_fail++;
      fprintf(stderr, "%s: loop %llu: malloc(%llu) failed\n", test_name,
              (unsigned long long)loop + 1, (unsigned long long)cfg.big);
    }
    big_s += bench_now() - t;
    pthread_barrier_wait(&phase); /* 4: free the rest */
    pthread_barrier_wait(&phase); /* end of loop */
    free_s += bench_span_seconds(&workers[0].free_span, cfg.threads, sizeof *workers);
  }
  bench_join(tids, cfg.threads);
  for (i = 0; i < cfg.threads; i++) {
    small_fail += workers[i].small_fail;
    bytes += workers[i].bytes_first_loop;
  }

  bench_result(test_name,
               "threads=%llu pointers=%llu min=%llu max=%llu holes=%llu big=%llu loops=%llu "
               "seed=%llu alloc_mb=%.1f seconds=%.4f loop_s=%.4f free_s=%.4f big_s=%.4f big_ok=%d "
               "big_fail=%llu small_fail=%llu",
               (unsigned long long)cfg.threads, (unsigned long long)cfg.pointers,
               (unsigned long long)cfg.min, (unsigned long long)cfg.max,
               (unsigned long long)cfg.holes, (unsigned long long)cfg.big,
               (unsigned long long)cfg.loops, (unsigned long long)cfg.seed,
               (double)bytes / 1048576.0, alloc_s, alloc_s / (double)cfg.loops, free_s, big_s, big_fail == 0,
               (unsigned long long)big_fail, (unsigned long long)small_fail);
  pthread_barrier_destroy(&phase);
  free(tids);
  free(workers);
  return BENCH_EXIT_OK;
}
