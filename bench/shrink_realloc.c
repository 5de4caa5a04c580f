/* shrink_realloc.c - grow to 20,000 bytes, touch, shrink to 1 (seed 000,
 * comment 3: the Delphi program that "executes in 2 secs for the default
 * memory manager but never completes with BigBrain").
 *
 * The Delphi original, line by line, and what stands for it here:
 *   for n := 1 to 10                      for loop < --loops
 *     SetLength(vStrings, 3000000)        the pointer array, calloc'ed once
 *                                         inside the timed region (later
 *                                         SetLength calls are no-ops)
 *     for i := ...                        for i < --count
 *       SetLength(vStrings[i], 20000)     realloc(v[i], --size); NULL the
 *                                         first loop, a 1-byte block after
 *       vStrings[i][k] := #1, k += 4096   one byte per --stride bytes
 *       SetLength(vStrings[i], 1)         realloc(v[i], --shrink)
 *
 * The strings survive from one loop to the next, so from loop 2 on every
 * grow starts from a shrunk block: an allocator that cannot reuse the space
 * given back by the shrink grows without bound. Content check: the byte at
 * offset 0 is written with a per-string, per-loop tag; the next loop's grow
 * (and the final pass) must still find it.
 *
 * Delphi strings are UTF-16, so the original's 20,000 characters are 40,000
 * bytes plus a 12-byte header and its touches fall every 8 KiB; the suite
 * follows the issue and the brief (20,000 bytes, every 4 KiB), and --size
 * and --stride give the literal variant (--size 40014 --stride 8192).
 */
#include "common.h"

#define TEST_NAME "shrink_realloc"

static struct {
  uint64_t count, loops, size, stride, shrink;
} cfg = {1000000, 10, 20000, 4096, 1};

static unsigned char tag(uint64_t i, uint64_t loop)
{
  return (unsigned char)(bench_mix64(i) + loop * 7 + 1);
}

int main(int argc, char **argv)
{
  static const char about[] =
      "Seed 000, comment 3: --count strings are grown to --size bytes with realloc,\n"
      "one byte per --stride bytes is written, then each is shrunk to --shrink\n"
      "bytes; the whole pass is repeated --loops times on the same strings.\n"
      "Reports seconds for the loops (and free_s for freeing everything after).";
  const bench_opt opts[] = {
      {"count", BENCH_OPT_U64, &cfg.count, 1, 1e10, "N", "number of strings"},
      {"loops", BENCH_OPT_U64, &cfg.loops, 1, 1e6, "L", "passes over all strings"},
      {"size", BENCH_OPT_U64, &cfg.size, 1, 1e9, "BYTES", "size each string grows to"},
      {"stride", BENCH_OPT_U64, &cfg.stride, 1, 1e9, "BYTES", "distance between touched bytes"},
      {"shrink", BENCH_OPT_U64, &cfg.shrink, 1, 1e9, "BYTES", "size each string shrinks to"},
  };
  unsigned char **v;
  uint64_t loop, i;
  double t0, t1, t2;

  bench_parse(argc, argv, about, opts, sizeof opts / sizeof opts[0]);
  if (cfg.shrink > cfg.size)
    bench_usage_error(argv[0], "--shrink must not exceed --size");

  t0 = bench_now();
  v = (unsigned char **)calloc(cfg.count, sizeof *v);
  if (!v)
    bench_oom(TEST_NAME, cfg.count * sizeof *v);
  for (loop = 0; loop < cfg.loops; loop++) {
    for (i = 0; i < cfg.count; i++) {
      unsigned char *p = (unsigned char *)realloc(v[i], cfg.size), *q;
      uint64_t off;
      unsigned char t = tag(i, loop);
      if (!p)
        bench_oom(TEST_NAME, cfg.size);
      if (loop > 0 && p[0] != tag(i, loop - 1))
        bench_corrupt(TEST_NAME, p, cfg.size, "first byte lost by the grow");
      for (off = 0; off < cfg.size; off += cfg.stride)
        p[off] = t;
      q = (unsigned char *)realloc(p, cfg.shrink);
      if (!q)
        bench_oom(TEST_NAME, cfg.shrink);
      v[i] = q;
    }
    fprintf(stderr, "%s: loop %llu/%llu done, %.2f s\n", TEST_NAME,
            (unsigned long long)loop + 1, (unsigned long long)cfg.loops, bench_now() - t0);
  }
  t1 = bench_now();

  for (i = 0; i < cfg.count; i++) {
    if (v[i][0] != tag(i, cfg.loops - 1))
      bench_corrupt(TEST_NAME, v[i], cfg.shrink, "first byte lost by the shrink");
    free(v[i]);
  }
  free(v);
  t2 = bench_now();

  bench_result(TEST_NAME,
               "count=%llu loops=%llu size=%llu stride=%llu shrink=%llu seconds=%.4f free_s=%.4f",
               (unsigned long long)cfg.count, (unsigned long long)cfg.loops,
               (unsigned long long)cfg.size, (unsigned long long)cfg.stride,
               (unsigned long long)cfg.shrink, t1 - t0, t2 - t1);
  return BENCH_EXIT_OK;
}
