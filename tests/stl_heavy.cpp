// stl_heavy.cpp: a C++ program that leans on the allocator through the STL:
// maps of strings to vectors, unordered maps with erase and rehash, trees of
// shared_ptr, strings grown by appending, lists and deques, over-aligned
// types, and threads passing containers to each other. Every part checks its
// own result against a value computed another way.
//
// It is built twice: linked normally and run under LD_PRELOAD=libspry.so,
// and linked with libspry.so. With --expect-spry it also checks that spry
// really serves operator new and malloc (spry_owns found through dlsym).
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#define EXPECT(cond)                                                          \
    do {                                                                      \
        if (!(cond)) {                                                        \
            std::fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__,   \
                         #cond);                                              \
            std::exit(1);                                                     \
        }                                                                     \
    } while (0)

static void maps_of_strings()
{
    const int n = 200000;
    std::map<std::string, std::vector<int>> m;
    for (int i = 0; i < n; i++) {
        std::vector<int> v(static_cast<size_t>(i % 50));
        std::iota(v.begin(), v.end(), i);
        m["key-" + std::to_string((static_cast<long long>(i) * 7919) % n)] =
            std::move(v);
    }
    EXPECT(m.size() == static_cast<size_t>(n)); // 7919 is prime: a bijection
    long long total = 0, expect = 0;
    for (auto &kv : m)
        total += std::accumulate(kv.second.begin(), kv.second.end(), 0LL);
    for (int i = 0; i < n; i++) {
        long long k = i % 50;
        expect += k * i + k * (k - 1) / 2;
    }
    EXPECT(total == expect);
    // erase every other key, then look the rest up
    int erased = 0;
    for (auto it = m.begin(); it != m.end();) {
        if (erased % 2 == 0)
            it = m.erase(it);
        else
            ++it;
        erased++;
    }
    EXPECT(m.size() == static_cast<size_t>(n / 2));
}

static void unordered_churn()
{
    std::unordered_map<int, std::string> u;
    for (int i = 0; i < 300000; i++)
        u.emplace(i, std::string(static_cast<size_t>(i % 100), 'a' + i % 26));
    for (int i = 0; i < 300000; i += 2)
        u.erase(i);
    u.rehash(1 << 20);
    size_t chars = 0;
    for (auto &kv : u) {
        EXPECT(kv.first % 2 == 1);
        EXPECT(kv.second.size() == static_cast<size_t>(kv.first % 100));
        chars += kv.second.size();
    }
    size_t expect = 0;
    for (int i = 1; i < 300000; i += 2)
        expect += static_cast<size_t>(i % 100);
    EXPECT(chars == expect);
    std::set<std::string> s;
    for (auto &kv : u)
        s.insert(kv.second);
    // (length, letter) = (i % 100, i % 26): 650 distinct pairs for odd i
    EXPECT(s.size() == 650);
}

struct Node {
    std::shared_ptr<Node> left, right;
    std::weak_ptr<Node> parent;
    int value;
};

static std::shared_ptr<Node> build(int depth, int &counter,
                                   const std::shared_ptr<Node> &parent)
{
    auto n = std::make_shared<Node>();
    n->value = counter++;
    n->parent = parent;
    if (depth > 0) {
        n->left = build(depth - 1, counter, n);
        n->right = build(depth - 1, counter, n);
    }
    return n;
}

static long long sum_tree(const std::shared_ptr<Node> &n)
{
    if (!n)
        return 0;
    if (n->left)
        EXPECT(n->left->parent.lock() == n);
    return n->value + sum_tree(n->left) + sum_tree(n->right);
}

static void shared_trees()
{
    for (int round = 0; round < 3; round++) {
        int counter = 0;
        auto root = build(16, counter, nullptr);
        long long nodes = (1LL << 17) - 1;
        EXPECT(counter == nodes);
        EXPECT(sum_tree(root) == nodes * (nodes - 1) / 2);
    }
}

static void strings_and_lists()
{
    std::string s;
    for (int i = 0; i < 400000; i++)
        s += std::to_string(i % 10);
    EXPECT(s.size() == 400000);
    std::ostringstream os;
    for (int i = 0; i < 100000; i++)
        os << i << ',';
    std::string joined = os.str();
    EXPECT(std::count(joined.begin(), joined.end(), ',') == 100000);
    std::list<std::string> l;
    std::deque<std::vector<char>> d;
    for (int i = 0; i < 100000; i++) {
        l.push_back(std::string(static_cast<size_t>(i % 300), 'x'));
        d.emplace_back(static_cast<size_t>(i % 1000), 'y');
        if (i % 3 == 0) {
            l.pop_front();
            d.pop_front();
        }
    }
    EXPECT(l.size() == 100000 - 33334 && d.size() == l.size());
}

struct alignas(64) Wide {
    double v[8];
};

static void over_aligned()
{
    std::vector<Wide> v;
    for (int i = 0; i < 100000; i++) {
        v.push_back(Wide{});
        v.back().v[0] = i;
    }
    EXPECT(reinterpret_cast<uintptr_t>(v.data()) % 64 == 0);
    for (int i = 0; i < 1000; i++) {
        std::unique_ptr<Wide> w(new Wide());
        EXPECT(reinterpret_cast<uintptr_t>(w.get()) % 64 == 0);
        auto arr = std::make_unique<Wide[]>(static_cast<size_t>(i + 1));
        EXPECT(reinterpret_cast<uintptr_t>(arr.get()) % 64 == 0);
    }
    EXPECT(v[99999].v[0] == 99999);
}

// producers sort vectors of strings and pass them to consumers, which free
// them: cross-thread frees of whole containers
static void threads_passing_containers()
{
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::unique_ptr<std::vector<std::string>>> q;
    const int producers = 6, consumers = 3, batches = 40, per = 3000;
    std::atomic<long> strings_seen{0};
    int producers_done = 0;
    std::vector<std::thread> ts;
    for (int p = 0; p < producers; p++)
        ts.emplace_back([&, p] {
            for (int b = 0; b < batches; b++) {
                auto v = std::make_unique<std::vector<std::string>>();
                for (int i = 0; i < per; i++)
                    v->push_back(std::to_string((i * 2654435761u + p + b) % 100000));
                std::sort(v->begin(), v->end());
                std::lock_guard<std::mutex> g(mu);
                q.push_back(std::move(v));
                cv.notify_one();
            }
            std::lock_guard<std::mutex> g(mu);
            producers_done++;
            cv.notify_all();
        });
    for (int c = 0; c < consumers; c++)
        ts.emplace_back([&] {
            for (;;) {
                std::unique_ptr<std::vector<std::string>> v;
                {
                    std::unique_lock<std::mutex> g(mu);
                    cv.wait(g, [&] { return !q.empty() || producers_done == producers; });
                    if (q.empty())
                        return;
                    v = std::move(q.front());
                    q.pop_front();
                }
                EXPECT(std::is_sorted(v->begin(), v->end()));
                EXPECT(v->size() == static_cast<size_t>(per));
                strings_seen += static_cast<long>(v->size());
            }
        });
    for (auto &t : ts)
        t.join();
    EXPECT(strings_seen == static_cast<long>(producers) * batches * per);
}

static void expect_spry()
{
    using owns_fn = bool (*)(const void *);
    auto owns = reinterpret_cast<owns_fn>(dlsym(RTLD_DEFAULT, "spry_owns"));
    if (!owns) {
        std::fprintf(stderr, "FAILED: --expect-spry but spry_owns is not in the "
                             "process: libspry.so was not loaded\n");
        std::exit(1);
    }
    auto *i = new int(5);
    auto *a = new std::string(1000, 'z');
    void *m = std::malloc(10);
    bool ok = owns(i) && owns(a->data()) && owns(m);
    delete i;
    delete a;
    std::free(m);
    if (!ok) {
        std::fprintf(stderr, "FAILED: libspry.so is loaded but operator new / "
                             "malloc are not served by it\n");
        std::exit(1);
    }
}

int main(int argc, char **argv)
{
    bool want_spry = argc > 1 && std::strcmp(argv[1], "--expect-spry") == 0;
    if (want_spry)
        expect_spry();
    maps_of_strings();
    unordered_churn();
    shared_trees();
    strings_and_lists();
    over_aligned();
    threads_passing_containers();
    std::printf("stl_heavy: all checks passed%s\n",
                want_spry ? " (served by spry)" : "");
    return 0;
}
