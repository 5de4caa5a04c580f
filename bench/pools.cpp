// pools.cpp - object pools over the allocator (seed 002, "Pools of objects":
// Baseline-pool<std::list> and <private_list> versus Multi-pool with 4..64
// sub-pools, 4 threads x 1000k, 8 x 1000k and 16 x 300k operations per
// thread, time in ms).
//
// A pool hands out 64-byte objects. It is --subpools sub-pools, each a mutex
// and a free list: --kind list keeps the objects in a std::list<Obj*> (every
// put allocates a list node with new and every get deletes one), --kind
// intrusive threads them through the object's own next pointer (no
// allocation inside the pool). One sub-pool is the seed's baseline pool: a
// single lock for everyone.
//
// Each thread holds up to --hold objects. One operation is a get or a put
// (a get when holding none, a put when holding --hold, else a coin flip),
// each on a sub-pool picked at random per operation (so with K sub-pools two
// threads collide with probability 1/K, and the seed's times keep falling as
// K passes the thread count). A get from an empty sub-pool creates the
// object with new; a put to a sub-pool already holding its share of --cap
// deletes the object. So the allocator sees: list nodes (list kind), and
// objects at the margins (both kinds), from many threads, often freed by a
// thread other than the one that allocated them.
//
// Content check: an object in a pool carries a stamp derived from its
// address, checked when it leaves the pool; a held object carries its
// holder's tag, checked before it is put back; at the end every object ever
// created must be found exactly once (deleted by a thread or drained).
#include "common.h"

#include <list>
#include <memory>
#include <mutex>
#include <new>

#define TEST_NAME "pools"

namespace {

struct Config {
  const char *kind = "intrusive";
  uint64_t subpools = 4;
  uint64_t threads = 4;
  uint64_t ops = 3000000;
  uint64_t hold = 8;
  uint64_t cap = 4096;
  uint64_t seed = 1;
} cfg;

struct Obj {
  Obj *next;        // intrusive free list; owned by the sub-pool's lock
  uint64_t stamp;   // in a pool: pool_stamp(this); held: the holder's tag
  uint64_t payload[6];
};
static_assert(sizeof(Obj) == 64, "Obj is meant to be 64 bytes");

uint64_t pool_stamp(const Obj *o) { return bench_mix64((uint64_t)(uintptr_t)o ^ 0x706f6f6cULL); }

// Fields under `lock` are touched only with it held. Each sub-pool sits on
// its own cache lines so that K locks really are K independent locks.
struct alignas(64) SubPool {
  std::mutex lock;
  std::list<Obj *> list;  // --kind list
  Obj *head = nullptr;    // --kind intrusive
  size_t count = 0;
};

struct ListKind {
  static Obj *take(SubPool &sp)
  {
    std::lock_guard<std::mutex> g(sp.lock);
    if (!sp.count)
      return nullptr;
    Obj *o = sp.list.front();
    sp.list.pop_front();
    sp.count--;
    return o;
  }
  static bool give(SubPool &sp, Obj *o, size_t cap)
  {
    std::lock_guard<std::mutex> g(sp.lock);
    if (sp.count >= cap)
      return false;
    sp.list.push_front(o);
    sp.count++;
    return true;
  }
};

struct IntrusiveKind {
  static Obj *take(SubPool &sp)
  {
    std::lock_guard<std::mutex> g(sp.lock);
    Obj *o = sp.head;
    if (!o)
      return nullptr;
    sp.head = o->next;
    sp.count--;
    return o;
  }
  static bool give(SubPool &sp, Obj *o, size_t cap)
  {
    std::lock_guard<std::mutex> g(sp.lock);
    if (sp.count >= cap)
      return false;
    o->next = sp.head;
    sp.head = o;
    sp.count++;
    return true;
  }
};

SubPool *subpools;
size_t subpool_cap;
pthread_barrier_t start_line;

struct Worker {
  bench_span span;
  uint64_t index;
  uint64_t created, deleted;  // written by the worker, read after join
};

template <class Kind>
void put_back(Worker *w, Obj *o, size_t k)
{
  o->stamp = pool_stamp(o);
  if (!Kind::give(subpools[k], o, subpool_cap)) {
    delete o;
    w->deleted++;
  }
}

template <class Kind>
void *pool_worker(void *arg)
{
  Worker *w = (Worker *)arg;
  const size_t hold = (size_t)cfg.hold, K = (size_t)cfg.subpools;
  std::unique_ptr<Obj *[]> held(new Obj *[hold]);
  const uint64_t tag = bench_mix64(w->index + 1);
  size_t nheld = 0;
  bench_rng rng;
  bench_rng_init(&rng, cfg.seed + w->index);

  pthread_barrier_wait(&start_line);
  w->span.start = bench_now();
  for (uint64_t op = 0; op < cfg.ops; op++) {
    uint64_t r = bench_rng_next(&rng);
    size_t k = K == 1 ? 0 : (size_t)(((r >> 32) * K) >> 32);
    bool get = nheld == 0 || (nheld < hold && (r & 1));
    if (get) {
      Obj *o = Kind::take(subpools[k]);
      if (o) {
        if (o->stamp != pool_stamp(o))
          bench_corrupt(TEST_NAME, o, sizeof *o, "pooled object's stamp damaged");
      } else {
        o = new Obj;
        w->created++;
      }
      o->stamp = tag;
      o->payload[0] = op;  // use the object a little, as a caller would
      held[nheld++] = o;
    } else {
      Obj *o = held[--nheld];
      if (o->stamp != tag)
        bench_corrupt(TEST_NAME, o, sizeof *o, "held object's stamp damaged");
      put_back<Kind>(w, o, k);
    }
  }
  while (nheld)
    put_back<Kind>(w, held[--nheld], 0);
  w->span.end = bench_now();
  return nullptr;
}

}  // namespace

int main(int argc, char **argv)
{
  static const char about[] =
      "Seed 002, object pools: --threads threads do --ops get/put operations each on\n"
      "a pool of 64-byte objects split in --subpools sub-pools (one mutex each,\n"
      "picked at random per operation); --kind list keeps pooled objects in a\n"
      "std::list (a node allocated per put), --kind intrusive in the objects\n"
      "themselves. An empty sub-pool makes a get call new; a full one (--cap split\n"
      "over the sub-pools) makes a put call delete. Reports seconds (wall time).";
  const bench_opt opts[] = {
      {"kind", BENCH_OPT_STR, &cfg.kind, 0, 0, "list|intrusive", "how a pool keeps its objects"},
      {"subpools", BENCH_OPT_U64, &cfg.subpools, 1, 65536, "K", "sub-pools (1 = one global pool)"},
      {"threads", BENCH_OPT_U64, &cfg.threads, 1, 1024, "T", "worker threads"},
      {"ops", BENCH_OPT_U64, &cfg.ops, 1, 1e12, "N", "get/put operations per thread"},
      {"hold", BENCH_OPT_U64, &cfg.hold, 1, 1e6, "H", "most objects a thread holds at once"},
      {"cap", BENCH_OPT_U64, &cfg.cap, 1, 1e9, "C", "objects all sub-pools keep, in total"},
      {"seed", BENCH_OPT_U64, &cfg.seed, 0, 1.8e19, "N", "PRNG seed (thread i uses N+i)"},
  };
  bench_parse(argc, argv, about, opts, sizeof opts / sizeof opts[0]);
  void *(*worker_fn)(void *);
  bool list_kind = strcmp(cfg.kind, "list") == 0;
  if (list_kind)
    worker_fn = pool_worker<ListKind>;
  else if (strcmp(cfg.kind, "intrusive") == 0)
    worker_fn = pool_worker<IntrusiveKind>;
  else
    bench_usage_error(argv[0], "--kind must be list or intrusive");
  std::set_new_handler([] { bench_die(BENCH_EXIT_FAILED, TEST_NAME ": operator new failed"); });

  subpools = new SubPool[cfg.subpools];
  subpool_cap = (size_t)((cfg.cap + cfg.subpools - 1) / cfg.subpools);
  std::unique_ptr<pthread_t[]> tids(new pthread_t[cfg.threads]);
  std::unique_ptr<Worker[]> workers(new Worker[cfg.threads]());
  for (uint64_t i = 0; i < cfg.threads; i++)
    workers[i].index = i;
  pthread_barrier_init(&start_line, nullptr, (unsigned)cfg.threads);
  bench_spawn(tids.get(), cfg.threads, worker_fn, workers.get(), sizeof(Worker));
  bench_join(tids.get(), cfg.threads);
  double seconds = bench_span_seconds(&workers[0].span, cfg.threads, sizeof(Worker));

  // Drain: every object created must be accounted for exactly once.
  uint64_t created = 0, deleted = 0, drained = 0;
  for (uint64_t i = 0; i < cfg.threads; i++) {
    created += workers[i].created;
    deleted += workers[i].deleted;
  }
  for (uint64_t k = 0; k < cfg.subpools; k++) {
    Obj *o;
    while ((o = list_kind ? ListKind::take(subpools[k]) : IntrusiveKind::take(subpools[k]))) {
      if (o->stamp != pool_stamp(o))
        bench_corrupt(TEST_NAME, o, sizeof *o, "pooled object's stamp damaged at drain");
      delete o;
      drained++;
    }
  }
  if (created != deleted + drained)
    bench_die(BENCH_EXIT_CORRUPT, "CORRUPT test=%s: %llu objects created, %llu deleted + %llu "
              "drained", TEST_NAME, (unsigned long long)created, (unsigned long long)deleted,
              (unsigned long long)drained);
  delete[] subpools;

  bench_result(TEST_NAME,
               "kind=%s subpools=%llu threads=%llu ops=%llu hold=%llu cap=%llu seed=%llu "
               "created=%llu seconds=%.4f mops=%.4f",
               cfg.kind, (unsigned long long)cfg.subpools, (unsigned long long)cfg.threads,
               (unsigned long long)cfg.ops, (unsigned long long)cfg.hold,
               (unsigned long long)cfg.cap, (unsigned long long)cfg.seed,
               (unsigned long long)created, seconds,
               (double)(cfg.ops * cfg.threads) / seconds / 1e6);
  pthread_barrier_destroy(&start_line);
  return BENCH_EXIT_OK;
}
