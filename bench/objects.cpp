// objects.cpp - many small objects with string fields, one thread (seed 000,
// comment 4: "a test that allocates lots of objects and assigns some values
// such as strings and numbers to them"; the reported figures were allocation
// time, free time and peak memory).
//
// One thread creates --count Person objects with new, each with numbers and
// two or three std::string fields, and keeps them in a std::vector (grown as
// it goes, as a Delphi TObjectList would be); then deletes them all in order
// and releases the vector. Every string is longer than libstdc++'s 15-byte
// small-string buffer, so each one is a heap block like a Delphi string:
// an object costs three or four allocations (object, 2-3 strings) plus the
// vector's growth.
//
// Content check: before an object is deleted, its id must be its index and
// the first and last letters of its strings must be the ones derived from
// the id when it was built.
#include "common.h"

#include <new>
#include <string>
#include <vector>

#define TEST_NAME "objects"

namespace {

struct Config {
  uint64_t count = 1500000;
  uint64_t seed = 1;
} cfg;

class Person {
public:
  uint64_t id;
  double balance;
  int32_t age;
  bool has_address;
  std::string name;     // 16..40 bytes
  std::string email;    // 20..64 bytes
  std::string address;  // 24..120 bytes in half the objects, else empty
};

// 256 random letters; fields are cut out of it at random offsets so that
// building a string costs a copy, not a character-by-character generator.
char letters[256 + 128];

char first_letter(uint64_t id, int field) { return (char)('A' + (id * 7 + field) % 26); }
char last_letter(uint64_t id, int field) { return (char)('a' + (id * 13 + field) % 26); }

void fill(std::string &s, bench_rng &rng, size_t lo, size_t hi, uint64_t id, int field)
{
  size_t len = (size_t)bench_rng_range(&rng, lo, hi);
  s.assign(letters + bench_rng_below(&rng, 256), len);
  s.front() = first_letter(id, field);
  s.back() = last_letter(id, field);
}

bool intact(const std::string &s, size_t lo, size_t hi, uint64_t id, int field)
{
  return s.size() >= lo && s.size() <= hi && s.front() == first_letter(id, field) &&
         s.back() == last_letter(id, field);
}

}  // namespace

int main(int argc, char **argv)
{
  static const char about[] =
      "Seed 000, comment 4: one thread creates --count objects (numbers and two or\n"
      "three heap-allocated std::string fields) into a std::vector, then deletes them\n"
      "all. Reports alloc_s and free_s.";
  const bench_opt opts[] = {
      {"count", BENCH_OPT_U64, &cfg.count, 1, 1e10, "N", "number of objects"},
      {"seed", BENCH_OPT_U64, &cfg.seed, 0, 1.8e19, "N", "PRNG seed"},
  };
  bench_parse(argc, argv, about, opts, sizeof opts / sizeof opts[0]);

  bench_rng rng;
  bench_rng_init(&rng, cfg.seed);
  for (size_t i = 0; i < sizeof letters; i++)
    letters[i] = (char)('a' + bench_rng_below(&rng, 26));

  // new throws when the allocator returns NULL: report it like malloc's NULL.
  std::set_new_handler([] { bench_die(BENCH_EXIT_FAILED, TEST_NAME ": operator new failed"); });

  std::vector<Person *> *all = new std::vector<Person *>();
  uint64_t strings = 0;
  double t0 = bench_now();
  for (uint64_t id = 0; id < cfg.count; id++) {
    Person *p = new Person();
    p->id = id;
    p->balance = (double)bench_rng_below(&rng, 1000000) / 100.0;
    p->age = (int32_t)bench_rng_range(&rng, 18, 99);
    fill(p->name, rng, 16, 40, id, 0);
    fill(p->email, rng, 20, 64, id, 1);
    p->has_address = bench_rng_below(&rng, 2) != 0;
    if (p->has_address)
      fill(p->address, rng, 24, 120, id, 2);
    strings += 2 + p->has_address;
    all->push_back(p);
  }
  double t1 = bench_now();
  for (uint64_t id = 0; id < cfg.count; id++) {
    Person *p = (*all)[id];
    if (p->id != id || !intact(p->name, 16, 40, id, 0) || !intact(p->email, 20, 64, id, 1) ||
        (p->has_address && !intact(p->address, 24, 120, id, 2)))
      bench_corrupt(TEST_NAME, p, sizeof *p, "object fields changed");
    delete p;
  }
  delete all;
  double t2 = bench_now();

  bench_result(TEST_NAME, "count=%llu strings=%llu seed=%llu alloc_s=%.4f free_s=%.4f",
               (unsigned long long)cfg.count, (unsigned long long)strings,
               (unsigned long long)cfg.seed, t1 - t0, t2 - t1);
  return BENCH_EXIT_OK;
}
