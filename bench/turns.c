/* turns.c - threads that take turns with a large working set: memory one
 * thread freed must serve the next thread's blocks.
 *
 * --threads threads start together and stay alive to the end, but work one
 * at a time, in order: a thread mallocs blocks of uniform random size in
 * [--min, --max] until they hold --set bytes, stamps them (every page),
 * checks and frees them all, then wakes the next thread and waits for the
 * last one to finish. --rounds times over. This is a pipeline whose stages
 * run in different threads, or a pool whose requests land on a different
 * worker each time: a per-thread allocator whose heaps keep what they freed
 * for their own next use holds --threads working sets where one is in use
 * (issue 8's "memory never given back", across threads).
 *
 * ops is the number of blocks allocated (and freed); seconds is the wall
 * time from the first turn's start to the last turn's end; peak RSS is the
 * other half of the result, to be read against --set.
 */
#include "common.h"

#define TEST_NAME "turns"

static struct {
  uint64_t threads, rounds, set, min, max, seed, corrupt_test;
  const char *touch_name;
  enum bench_touch touch;
} cfg = {4, 2, (uint64_t)32 << 20, 1024, 4096, 1, 0, "pages", BENCH_TOUCH_PAGES};

struct worker {
  bench_rng rng;
  uint64_t index, ops;
};

static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cond = PTHREAD_COND_INITIALIZER;
static uint64_t turn; /* whose turn: round * threads + index; threads * rounds when done */
static double first_start, last_end;

static void wait_for(uint64_t t)
{
  pthread_mutex_lock(&turn_lock);
  while (turn < t)
    pthread_cond_wait(&turn_cond, &turn_lock);
  pthread_mutex_unlock(&turn_lock);
}

static void pass_turn(void)
{
  pthread_mutex_lock(&turn_lock);
  turn++;
  pthread_cond_broadcast(&turn_cond);
  pthread_mutex_unlock(&turn_lock);
}

static void *run(void *arg)
{
  struct worker *w = (struct worker *)arg;
  /* blocks of at least min bytes: the set never needs more slots */
  size_t cap = (size_t)(cfg.set / cfg.min) + 1;
  void **slot = (void **)malloc(cap * sizeof *slot);
  size_t *size = (size_t *)malloc(cap * sizeof *size);
  uint64_t r;
  if (!slot || !size)
    bench_oom(TEST_NAME, cap * sizeof *slot);
  for (r = 0; r < cfg.rounds; r++) {
    size_t n = 0, k;
    uint64_t bytes = 0;
    wait_for(r * cfg.threads + w->index);
    if (r == 0 && w->index == 0)
      first_start = bench_now();
    while (bytes < cfg.set) {
      size_t s = (size_t)bench_rng_range(&w->rng, cfg.min, cfg.max);
      bench_slot_fill(TEST_NAME, slot, size, n, s, cfg.touch);
      bytes += s;
      n++;
    }
    /* --corrupt-test: the first thread damages a block of its first turn */
    if (cfg.corrupt_test && r == 0 && w->index == 0)
      ((unsigned char *)slot[n / 2])[size[n / 2] - 1] ^= 0x5a;
    for (k = 0; k < n; k++)
      bench_slot_release(TEST_NAME, slot, size, k, cfg.touch);
    w->ops += n;
    if (r == cfg.rounds - 1 && w->index == cfg.threads - 1)
      last_end = bench_now();
    pass_turn();
  }
  wait_for(cfg.threads * cfg.rounds);
  free(slot);
  free(size);
  return NULL;
}

int main(int argc, char **argv)
{
  static const char about[] =
      "Issue 8, threads that take turns: --threads threads, all alive, work one at\n"
      "a time: each mallocs blocks of --min..--max bytes until they hold --set\n"
      "bytes, writes every page, checks and frees them, then wakes the next;\n"
      "--rounds times over. Reports ops (blocks), seconds; peak RSS against --set\n"
      "is the point.";
  const bench_opt opts[] = {
      {"threads", BENCH_OPT_U64, &cfg.threads, 1, 512, "T", "threads taking turns"},
      {"rounds", BENCH_OPT_U64, &cfg.rounds, 1, 1e6, "R", "turns of each thread"},
      {"set", BENCH_OPT_U64, &cfg.set, 1, 1e12, "BYTES", "bytes a turn allocates"},
      {"min", BENCH_OPT_U64, &cfg.min, 16, 1e12, "BYTES", "smallest block"},
      {"max", BENCH_OPT_U64, &cfg.max, 16, 1e12, "BYTES", "largest block"},
      BENCH_OPT_TOUCH(cfg.touch_name),
      {"seed", BENCH_OPT_U64, &cfg.seed, 0, 1.8e19, "N", "PRNG seed"},
      {"corrupt-test", BENCH_OPT_FLAG, &cfg.corrupt_test, 0, 0, NULL, NULL},
  };
  uint64_t i, ops = 0;

  bench_parse(argc, argv, about, opts, sizeof opts / sizeof opts[0]);
  if (cfg.min > cfg.max)
    bench_usage_error(argv[0], "--min must not exceed --max");
  cfg.touch = bench_touch_option(argv[0], cfg.touch_name);
  struct worker *workers = (struct worker *)calloc(cfg.threads, sizeof *workers);
  pthread_t *tids = (pthread_t *)calloc(cfg.threads, sizeof *tids);
  if (!workers || !tids)
    bench_oom(TEST_NAME, cfg.threads * sizeof *workers);
  for (i = 0; i < cfg.threads; i++) {
    bench_rng_init(&workers[i].rng, cfg.seed + i);
    workers[i].index = i;
  }
  bench_spawn(tids, (size_t)cfg.threads, run, workers, sizeof *workers);
  bench_join(tids, (size_t)cfg.threads);
  for (i = 0; i < cfg.threads; i++)
    ops += workers[i].ops;
  bench_result(TEST_NAME,
               "threads=%llu rounds=%llu set=%llu min=%llu max=%llu touch=%s seed=%llu "
               "seconds=%.4f ops=%llu",
               (unsigned long long)cfg.threads, (unsigned long long)cfg.rounds,
               (unsigned long long)cfg.set, (unsigned long long)cfg.min,
               (unsigned long long)cfg.max, cfg.touch_name, (unsigned long long)cfg.seed,
               last_end - first_start, (unsigned long long)ops);
  free(workers);
  free(tids);
  return BENCH_EXIT_OK;
}
