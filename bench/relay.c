/* relay.c - threads that come and go, each taking over the blocks of the one
 * before (issue 8's "server pattern" as Larson and Krishnan's server
 * benchmark has it: a short-lived thread per request, which inherits a
 * working set that earlier threads allocated).
 *
 * --threads lanes run at once. A lane is an array of --live slots, filled by
 * the main thread at the start. A lane's thread does --steps steps: each
 * picks a slot at random, checks and frees its block and mallocs a new one
 * of uniform random size in [--min, --max], stamped. Then, until --seconds
 * have passed, it starts the lane's next thread and exits: the new thread
 * frees the blocks of threads that are gone (or going), and its allocator
 * has to find a heap for it and get back what the old threads held. At the
 * end the main thread checks and frees every lane's blocks.
 *
 * ops is the number of steps (one free and one malloc each); mops is
 * millions per second from the first thread's start to the last one's end;
 * generations is the number of threads started. Peak RSS is the other half
 * of the result: an allocator whose memory stays with the threads that left
 * shows it here.
 */
#include "common.h"

#include <stdatomic.h>

#define TEST_NAME "relay"

static struct {
  uint64_t threads, live, steps, min, max, seed, corrupt_test;
  double seconds;
  const char *touch_name;
  enum bench_touch touch;
} cfg = {8, 1000, 10000, 8, 1000, 1, 0, 1.0, "ends", BENCH_TOUCH_ENDS};

struct lane {
  void **slot;
  size_t *size;
  bench_rng rng;
  uint64_t steps, generations;
  struct bench_span span;
  int corrupted;
};

static struct lane *lanes;
static atomic_int stop_flag;
static atomic_int lanes_running;
static pthread_attr_t thread_attr;

static void *lane_run(void *arg)
{
  struct lane *l = (struct lane *)arg;
  uint64_t i;
  if (l->generations == 1 && l->steps == 0)
    l->span.start = bench_now();
  for (;;) {
    for (i = 0; i < cfg.steps; i++) {
      size_t k = (size_t)bench_rng_below(&l->rng, cfg.live);
      size_t n = (size_t)bench_rng_range(&l->rng, cfg.min, cfg.max);
      bench_slot_release(TEST_NAME, l->slot, l->size, k, cfg.touch);
      bench_slot_fill(TEST_NAME, l->slot, l->size, k, n, cfg.touch);
      /* --corrupt-test: lane 0 damages a live block once; its release or
       * the teardown must find it */
      if (cfg.corrupt_test && l == &lanes[0] && !l->corrupted && l->steps + i == 100) {
        ((unsigned char *)l->slot[k])[l->size[k] - 1] ^= 0x5a;
        l->corrupted = 1;
      }
    }
    l->steps += cfg.steps;
    l->span.end = bench_now();
    if (atomic_load_explicit(&stop_flag, memory_order_relaxed))
      break;
    /* the lane's next thread; where none can start (a thread limit), this
     * one goes on */
    pthread_t t;
    l->generations++;
    if (pthread_create(&t, &thread_attr, lane_run, l) == 0) {
      pthread_detach(t);
      return NULL;
    }
    l->generations--;
  }
  /* the last touch of the lane: the main thread frees it after this */
  atomic_fetch_sub_explicit(&lanes_running, 1, memory_order_release);
  return NULL;
}

/* Counted before the thread runs, so that the main thread's wait sees it. */
static void lane_start(struct lane *l)
{
  pthread_t t;
  int rc;
  l->generations++;
  rc = pthread_create(&t, &thread_attr, lane_run, l);
  if (rc != 0)
    bench_die(BENCH_EXIT_FAILED, "pthread_create: %s", strerror(rc));
  pthread_detach(t);
}

int main(int argc, char **argv)
{
  static const char about[] =
      "Issue 8, threads that come and go: --threads lanes of --live blocks each;\n"
      "a lane's thread frees and mallocs at random slots (sizes in [--min, --max])\n"
      "for --steps steps, then starts the lane's next thread and exits, until\n"
      "--seconds have passed. Reports ops (steps), mops, generations (threads\n"
      "started); peak RSS matters too.";
  const bench_opt opts[] = {
      {"threads", BENCH_OPT_U64, &cfg.threads, 1, 512, "T", "lanes (threads at once)"},
      {"live", BENCH_OPT_U64, &cfg.live, 1, 1e8, "K", "blocks per lane"},
      {"steps", BENCH_OPT_U64, &cfg.steps, 1, 1e12, "N", "steps of each thread"},
      {"min", BENCH_OPT_U64, &cfg.min, 1, 1e12, "BYTES", "smallest block size"},
      {"max", BENCH_OPT_U64, &cfg.max, 1, 1e12, "BYTES", "largest block size"},
      {"seconds", BENCH_OPT_DOUBLE, &cfg.seconds, 0.001, 3600, "S",
       "after this, the running threads finish their steps and start no successor"},
      BENCH_OPT_TOUCH(cfg.touch_name),
      {"seed", BENCH_OPT_U64, &cfg.seed, 0, 1.8e19, "N", "PRNG seed (lane i uses N+i)"},
      {"corrupt-test", BENCH_OPT_FLAG, &cfg.corrupt_test, 0, 0, NULL, NULL},
  };
  uint64_t i, ops = 0, generations = 0, k;
  double seconds;

  bench_parse(argc, argv, about, opts, sizeof opts / sizeof opts[0]);
  if (cfg.min > cfg.max)
    bench_usage_error(argv[0], "--min %llu is larger than --max %llu",
                      (unsigned long long)cfg.min, (unsigned long long)cfg.max);
  cfg.touch = bench_touch_option(argv[0], cfg.touch_name);

  lanes = (struct lane *)calloc(cfg.threads, sizeof *lanes);
  if (!lanes)
    bench_oom(TEST_NAME, cfg.threads * sizeof *lanes);
  for (i = 0; i < cfg.threads; i++) {
    struct lane *l = &lanes[i];
    l->slot = (void **)calloc(cfg.live, sizeof *l->slot);
    l->size = (size_t *)calloc(cfg.live, sizeof *l->size);
    if (!l->slot || !l->size)
      bench_oom(TEST_NAME, cfg.live * sizeof *l->slot);
    bench_rng_init(&l->rng, cfg.seed + i);
    for (k = 0; k < cfg.live; k++)
      bench_slot_fill(TEST_NAME, l->slot, l->size, k,
                      (size_t)bench_rng_range(&l->rng, cfg.min, cfg.max), cfg.touch);
  }
  /* 1 MiB stacks, as bench_spawn's workers */
  pthread_attr_init(&thread_attr);
  pthread_attr_setstacksize(&thread_attr, (size_t)1 << 20);
  atomic_store(&lanes_running, (int)cfg.threads);
  for (i = 0; i < cfg.threads; i++)
    lane_start(&lanes[i]);
  bench_sleep(cfg.seconds);
  atomic_store_explicit(&stop_flag, 1, memory_order_relaxed);
  /* each lane's last thread finishes its steps: polled, no deadline */
  while (atomic_load_explicit(&lanes_running, memory_order_acquire) > 0)
    bench_sleep(0.001);

  for (i = 0; i < cfg.threads; i++) {
    ops += lanes[i].steps;
    generations += lanes[i].generations;
  }
  seconds = bench_span_seconds(&lanes[0].span, (size_t)cfg.threads, sizeof *lanes);
  /* checked before the result: a damaged block ends the run without one */
  for (i = 0; i < cfg.threads; i++)
    bench_slots_free(TEST_NAME, lanes[i].slot, lanes[i].size, cfg.live, cfg.touch);
  bench_result(TEST_NAME,
               "threads=%llu live=%llu steps=%llu min=%llu max=%llu touch=%s seed=%llu "
               "seconds=%.4f ops=%llu generations=%llu mops=%.4f",
               (unsigned long long)cfg.threads, (unsigned long long)cfg.live,
               (unsigned long long)cfg.steps, (unsigned long long)cfg.min,
               (unsigned long long)cfg.max, cfg.touch_name, (unsigned long long)cfg.seed,
               seconds, (unsigned long long)ops, (unsigned long long)generations,
               (double)ops / seconds / 1e6);
  pthread_attr_destroy(&thread_attr);
  free(lanes);
  return BENCH_EXIT_OK;
}
