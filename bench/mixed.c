/* mixed.c - one thread, many sizes, a large live set (issue 8).
 *
 * The churn surface draws sizes from one narrow band per cell; a real
 * program mixes them: many small blocks (nodes, strings), fewer medium
 * ones, a tail of buffers. Here one thread keeps about --live blocks (the
 * slot walk of common.h over 2 x --live slots) with sizes from 8 B to
 * 64 KiB drawn from a fixed distribution skewed to small sizes, and runs
 * --ops steps, one malloc or free each, at random slots. Every block is
 * stamped after malloc and checked before free.
 *
 * The distribution: a size class [2^k, 2^(k+1)) is drawn with the weight
 * below, then a size uniform in it. Half the blocks are 64 B or less, 90%
 * 1 KiB or less, 1.3% 8 KiB or more; the mean is about 590 B, so a live
 * set of 1,000,000 blocks holds about 560 MiB. Same for every allocator
 * (the PRNG is seeded with --seed).
 *
 * Three phases are timed: fill (--live mallocs), steps (--ops), free (the
 * live set checked and freed). seconds is their sum, the headline; peak RSS
 * shows how tightly the mix is packed.
 */
#include "common.h"

#define TEST_NAME "mixed"

static struct {
  uint64_t live, ops, seed, corrupt_test;
  const char *touch_name;
  enum bench_touch touch;
} cfg = {200000, 10000000, 1, 0, "ends", BENCH_TOUCH_ENDS};

/* Weights (per mille) of the size classes [8,16), [16,32), ..., [32K,64K]. */
static const unsigned mixed_weight[13] = {100, 200, 220, 160, 110, 80, 50,
                                          35,  20,  12,  7,   4,   2};

/* A size from the distribution: the class from a cumulative table of the
 * weights (the first entry above a draw in [0, 1000)), then uniform in it. */
static size_t mixed_size(bench_rng *rng, const unsigned *cumulative)
{
  unsigned r = (unsigned)bench_rng_below(rng, 1000), c = 0;
  size_t lo;
  while (r >= cumulative[c])
    c++;
  lo = (size_t)8 << c;
  return lo + (size_t)bench_rng_below(rng, c == 12 ? lo + 1 : lo);
}

int main(int argc, char **argv)
{
  static const char about[] =
      "Issue 8, mixed sizes: one thread keeps about --live blocks of 8 B to 64 KiB\n"
      "(skewed to small sizes: half <= 64 B, mean ~590 B) and runs --ops steps, each\n"
      "one malloc or one free at a random one of 2 x --live slots, checking every\n"
      "block before it is freed. Reports seconds (fill + steps + free) and each\n"
      "phase; peak RSS.";
  const bench_opt opts[] = {
      {"live", BENCH_OPT_U64, &cfg.live, 1, 1e9, "K", "live blocks (about)"},
      {"ops", BENCH_OPT_U64, &cfg.ops, 0, 1e12, "N", "steps (one malloc or free each)"},
      BENCH_OPT_TOUCH(cfg.touch_name),
      {"seed", BENCH_OPT_U64, &cfg.seed, 0, 1.8e19, "N", "PRNG seed"},
      {"corrupt-test", BENCH_OPT_FLAG, &cfg.corrupt_test, 0, 0, NULL, NULL},
  };
  unsigned cumulative[13], sum = 0;
  size_t nslots, k, live_end = 0;
  void **slot;
  size_t *size;
  uint64_t op, bytes = 0;
  double t0, t1, t2, t3;
  bench_rng rng;
  int c;

  bench_parse(argc, argv, about, opts, sizeof opts / sizeof opts[0]);
  cfg.touch = bench_touch_option(argv[0], cfg.touch_name);
  for (c = 0; c < 13; c++)
    cumulative[c] = sum += mixed_weight[c];

  nslots = 2 * (size_t)cfg.live;
  slot = (void **)calloc(nslots, sizeof *slot);
  size = (size_t *)calloc(nslots, sizeof *size);
  if (!slot || !size)
    bench_oom(TEST_NAME, nslots * sizeof *slot);
  bench_rng_init(&rng, cfg.seed);

  t0 = bench_now();
  for (k = 0; k < cfg.live; k++)
    bench_slot_fill(TEST_NAME, slot, size, k, mixed_size(&rng, cumulative), cfg.touch);
  t1 = bench_now();
  for (op = 0; op < cfg.ops; op++) {
    k = (size_t)bench_rng_below(&rng, nslots);
    if (slot[k]) {
      /* --corrupt-test: damage the first block freed after 100 steps. */
      if (cfg.corrupt_test && op >= 100) {
        ((unsigned char *)slot[k])[size[k] - 1] ^= 0x5a;
        cfg.corrupt_test = 0;
      }
      bench_slot_release(TEST_NAME, slot, size, k, cfg.touch);
    } else {
      bench_slot_fill(TEST_NAME, slot, size, k, mixed_size(&rng, cumulative), cfg.touch);
    }
  }
  t2 = bench_now();
  for (k = 0; k < nslots; k++) {
    if (slot[k]) {
      live_end++;
      bytes += size[k];
    }
  }
  bench_slots_free(TEST_NAME, slot, size, nslots, cfg.touch);
  t3 = bench_now();

  bench_result(TEST_NAME,
               "live=%llu ops=%llu touch=%s seed=%llu live_end=%llu live_mib=%.1f "
               "fill_s=%.4f steps_s=%.4f free_s=%.4f seconds=%.4f mops=%.4f",
               (unsigned long long)cfg.live, (unsigned long long)cfg.ops, cfg.touch_name,
               (unsigned long long)cfg.seed, (unsigned long long)live_end,
               (double)bytes / 1048576.0, t1 - t0, t2 - t1, t3 - t2, t3 - t0,
               t2 > t1 ? (double)cfg.ops / (t2 - t1) / 1e6 : 0.0);
  return BENCH_EXIT_OK;
}
