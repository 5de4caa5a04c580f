/* exchange.c - threads that come and go and hand blocks to each other (in
 * the manner of mimalloc's stress test): blocks of mixed sizes, most small,
 * a few of hundreds of KiB, live across threads and across their lifetimes.
 *
 * --rounds times, --threads threads start together, run --steps steps each
 * and exit; then the next round's threads start. A thread keeps up to --live
 * blocks in slots of its own. Each step, at random: a malloc into a new slot
 * (60%), a check and free of one of its blocks (25%), or a swap of one of
 * its blocks with a random slot of a shared array of --transfer slots
 * (15%): it leaves its block there and takes whatever another thread left.
 * So blocks are freed by their own thread, by a thread of the same round, or
 * by one of a later round, after their allocating thread has exited. Sizes:
 * 90% 8-128 B, 9% 128 B-8 KiB, 1% 8 KiB up to --max. Every block is stamped and
 * checked before it is freed. At its end a thread frees what its slots
 * hold; the transfer array's blocks are freed by the main thread at the end.
 *
 * ops is the number of steps of all threads; mops is millions per second
 * over the whole run (thread starts included). Peak RSS is the other half of
 * the result: memory that stays with threads that left, or is not reused
 * across threads, shows there.
 */
#include "common.h"

#include <stdatomic.h>

#define TEST_NAME "exchange"

static struct {
  uint64_t threads, rounds, steps, live, transfer, max, seed, corrupt_test;
  const char *touch_name;
  enum bench_touch touch;
} cfg = {8, 50, 10000, 500, 1000, 409600, 1, 0, "ends", BENCH_TOUCH_ENDS};

struct block {
  void *p;
  size_t n;
};

/* The shared array: a slot holds a block's record (pointer and size), so
 * that one exchange hands over a block and its size at once. */
struct shared {
  _Atomic(struct block *) cell;
};

static struct shared *transfer;

struct worker {
  bench_rng rng;
  uint64_t steps;
  int corrupt;
};

static size_t pick_size(bench_rng *r)
{
  uint64_t k = bench_rng_below(r, 1000);
  if (k < 10 && cfg.max > 8192)
    return (size_t)bench_rng_range(r, 8192, cfg.max);
  if (k < 100)
    return (size_t)bench_rng_range(r, 128, 8192);
  return (size_t)bench_rng_range(r, 8, 128);
}

/* A block travels with its size in a small record of its own, allocated
 * and freed with it: the record's malloc and free are part of the load. */
static struct block *block_new(bench_rng *r)
{
  struct block *b = (struct block *)malloc(sizeof *b);
  if (!b)
    bench_oom(TEST_NAME, sizeof *b);
  b->n = pick_size(r);
  b->p = malloc(b->n);
  if (!b->p)
    bench_oom(TEST_NAME, b->n);
  bench_stamp(b->p, b->n, cfg.touch);
  return b;
}

static void block_free(struct block *b, const char *when)
{
  if (!bench_stamp_ok(b->p, b->n, cfg.touch))
    bench_corrupt(TEST_NAME, b->p, b->n, when);
  free(b->p);
  free(b);
}

static void *run(void *arg)
{
  struct worker *w = (struct worker *)arg;
  struct block **slot = (struct block **)malloc(cfg.live * sizeof *slot);
  size_t n = 0;
  uint64_t i;
  if (!slot)
    bench_oom(TEST_NAME, cfg.live * sizeof *slot);
  for (i = 0; i < cfg.steps; i++) {
    uint64_t k = bench_rng_below(&w->rng, 100);
    if (k < 60) {
      if (n < cfg.live)
        slot[n++] = block_new(&w->rng);
    } else if (k < 85) {
      if (n) {
        size_t j = (size_t)bench_rng_below(&w->rng, n);
        block_free(slot[j], "stamp damaged before free");
        slot[j] = slot[--n];
      }
    } else if (n) {
      size_t j = (size_t)bench_rng_below(&w->rng, n);
      size_t t = (size_t)bench_rng_below(&w->rng, cfg.transfer);
      /* --corrupt-test: the first thread damages a block it hands over */
      if (w->corrupt && i > 100) {
        ((unsigned char *)slot[j]->p)[slot[j]->n - 1] ^= 0x5a;
        w->corrupt = 0;
      }
      struct block *got = atomic_exchange_explicit(&transfer[t].cell, slot[j], memory_order_acq_rel);
      if (got)
        slot[j] = got;
      else
        slot[j] = slot[--n];
    }
  }
  w->steps = cfg.steps;
  for (i = 0; i < n; i++)
    block_free(slot[i], "stamp damaged at the thread's end");
  free(slot);
  return NULL;
}

int main(int argc, char **argv)
{
  static const char about[] =
      "Issue 8, threads that come and go and hand blocks to each other (in the\n"
      "manner of mimalloc's stress test): --rounds rounds of --threads threads,\n"
      "each doing --steps steps: malloc (60%), check and free one of its blocks\n"
      "(25%), or swap one with a random slot of a shared array of --transfer\n"
      "slots (15%). Sizes 90% 8-128 B, 9% 128 B-8 KiB, 1% 8 KiB-max. Reports\n"
      "ops (steps), mops; peak RSS matters too.";
  const bench_opt opts[] = {
      {"threads", BENCH_OPT_U64, &cfg.threads, 1, 512, "T", "threads of each round"},
      {"rounds", BENCH_OPT_U64, &cfg.rounds, 1, 1e9, "R", "rounds (thread generations)"},
      {"steps", BENCH_OPT_U64, &cfg.steps, 1, 1e12, "N", "steps of each thread"},
      {"live", BENCH_OPT_U64, &cfg.live, 1, 1e8, "K", "blocks a thread keeps at most"},
      {"transfer", BENCH_OPT_U64, &cfg.transfer, 1, 1e8, "S", "slots of the shared array"},
      {"max", BENCH_OPT_U64, &cfg.max, 128, 1e12, "BYTES", "largest block size"},
      BENCH_OPT_TOUCH(cfg.touch_name),
      {"seed", BENCH_OPT_U64, &cfg.seed, 0, 1.8e19, "N", "PRNG seed"},
      {"corrupt-test", BENCH_OPT_FLAG, &cfg.corrupt_test, 0, 0, NULL, NULL},
  };
  uint64_t r, i, ops = 0;
  double start, seconds;

  bench_parse(argc, argv, about, opts, sizeof opts / sizeof opts[0]);
  cfg.touch = bench_touch_option(argv[0], cfg.touch_name);
  transfer = (struct shared *)calloc(cfg.transfer, sizeof *transfer);
  struct worker *workers = (struct worker *)calloc(cfg.threads, sizeof *workers);
  pthread_t *tids = (pthread_t *)calloc(cfg.threads, sizeof *tids);
  if (!transfer || !workers || !tids)
    bench_oom(TEST_NAME, cfg.transfer * sizeof *transfer);

  start = bench_now();
  for (r = 0; r < cfg.rounds; r++) {
    for (i = 0; i < cfg.threads; i++) {
      bench_rng_init(&workers[i].rng, cfg.seed + r * cfg.threads + i);
      workers[i].corrupt = cfg.corrupt_test && r == 0 && i == 0;
    }
    bench_spawn(tids, (size_t)cfg.threads, run, workers, sizeof *workers);
    bench_join(tids, (size_t)cfg.threads);
    for (i = 0; i < cfg.threads; i++)
      ops += workers[i].steps;
  }
  seconds = bench_now() - start;
  /* The shared array's blocks are checked before the result: a damaged one
   * left there ends the run without a RESULT line (printed first, a failed
   * run looked like a measurement; the corruption test failed when its
   * damaged block was never taken out of the array) */
  for (i = 0; i < cfg.transfer; i++) {
    struct block *b = atomic_load_explicit(&transfer[i].cell, memory_order_acquire);
    if (b)
      block_free(b, "stamp damaged at teardown");
  }
  bench_result(TEST_NAME,
               "threads=%llu rounds=%llu steps=%llu live=%llu transfer=%llu max=%llu touch=%s "
               "seed=%llu seconds=%.4f ops=%llu mops=%.4f",
               (unsigned long long)cfg.threads, (unsigned long long)cfg.rounds,
               (unsigned long long)cfg.steps, (unsigned long long)cfg.live,
               (unsigned long long)cfg.transfer, (unsigned long long)cfg.max, cfg.touch_name,
               (unsigned long long)cfg.seed, seconds, (unsigned long long)ops,
               (double)ops / seconds / 1e6);
  free(transfer);
  free(workers);
  free(tids);
  return BENCH_EXIT_OK;
}
