// cxx_operators.cpp: every replaceable operator new/delete form goes to spry
// (spry_owns is true for what it returns), keeps the alignment it promises,
// and fails the way the standard says: a throwing new of an impossible size
// calls the new_handler and throws std::bad_alloc, a nothrow new returns
// nullptr.
//
// Built linked with libspry.so, and built plainly and run under
// LD_PRELOAD=libspry.so; spry_owns is looked up with dlsym in both.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#define EXPECT(cond)                                                          \
    do {                                                                      \
        if (!(cond)) {                                                        \
            std::fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__,   \
                         #cond);                                              \
            std::exit(1);                                                     \
        }                                                                     \
    } while (0)

using owns_fn = bool (*)(const void *);
static owns_fn owns;

static void served(void *p, std::size_t n, std::size_t align, const char *form)
{
    if (!p || !owns(p) || reinterpret_cast<uintptr_t>(p) % align != 0) {
        std::fprintf(stderr, "FAILED: %s(%zu) = %p: %s\n", form, n, p,
                     !p ? "null" : !owns(p) ? "not served by spry"
                                            : "misaligned");
        std::exit(1);
    }
    std::memset(p, 0x5C, n);
}

static volatile std::size_t g_huge = SIZE_MAX - 4096;
static int handler_calls;

static void new_handler()
{
    handler_calls++;
    std::set_new_handler(nullptr); // the next failure throws
}

struct alignas(128) Wide {
    char c[200];
};

struct Plain {
    long v[5];
};

int main()
{
    owns = reinterpret_cast<owns_fn>(dlsym(RTLD_DEFAULT, "spry_owns"));
    if (!owns) {
        std::fprintf(stderr, "FAILED: spry_owns not found: libspry.so is not "
                             "loaded\n");
        return 1;
    }
    const std::size_t sizes[] = {1, 8, 16, 100, 4000, 70000, 3 << 20};
    for (std::size_t n : sizes) {
        void *p;
        p = ::operator new(n);
        served(p, n, n >= 16 ? 16 : 8, "operator new");
        ::operator delete(p);
        p = ::operator new(n);
        served(p, n, n >= 16 ? 16 : 8, "operator new");
        ::operator delete(p, n); // sized
        p = ::operator new(n, std::nothrow);
        served(p, n, n >= 16 ? 16 : 8, "operator new(nothrow)");
        ::operator delete(p, std::nothrow);
        p = ::operator new[](n);
        served(p, n, n >= 16 ? 16 : 8, "operator new[]");
        ::operator delete[](p);
        p = ::operator new[](n);
        served(p, n, n >= 16 ? 16 : 8, "operator new[]");
        ::operator delete[](p, n); // sized
        p = ::operator new[](n, std::nothrow);
        served(p, n, n >= 16 ? 16 : 8, "operator new[](nothrow)");
        ::operator delete[](p, std::nothrow);
        for (std::size_t a = 16; a <= (1 << 16); a *= 4) {
            std::align_val_t al{a};
            p = ::operator new(n, al);
            served(p, n, a, "operator new(align)");
            ::operator delete(p, al);
            p = ::operator new(n, al);
            served(p, n, a, "operator new(align)");
            ::operator delete(p, n, al); // sized + aligned
            p = ::operator new(n, al, std::nothrow);
            served(p, n, a, "operator new(align, nothrow)");
            ::operator delete(p, al, std::nothrow);
            p = ::operator new[](n, al);
            served(p, n, a, "operator new[](align)");
            ::operator delete[](p, al);
            p = ::operator new[](n, al);
            served(p, n, a, "operator new[](align)");
            ::operator delete[](p, n, al);
            p = ::operator new[](n, al, std::nothrow);
            served(p, n, a, "operator new[](align, nothrow)");
            ::operator delete[](p, al, std::nothrow);
        }
    }

    // new-expressions: plain, array, over-aligned (aligned new and sized
    // aligned delete), nothrow
    for (int i = 0; i < 1000; i++) {
        Plain *a = new Plain();
        served(a, sizeof *a, 8, "new Plain");
        delete a;
        Plain *b = new Plain[static_cast<std::size_t>(i + 1)];
        served(b, sizeof *b, 8, "new Plain[]");
        delete[] b;
        Wide *w = new Wide();
        served(w, sizeof *w, 128, "new Wide (alignas 128)");
        delete w;
        Wide *wa = new Wide[3];
        served(wa, sizeof *wa, 128, "new Wide[3]");
        delete[] wa;
        Plain *c = new (std::nothrow) Plain();
        served(c, sizeof *c, 8, "new (nothrow) Plain");
        delete c;
    }

    // impossible sizes
    int threw = 0;
    try {
        void *p = ::operator new(g_huge);
        std::fprintf(stderr, "FAILED: operator new(SIZE_MAX-4096) returned %p\n", p);
        return 1;
    } catch (const std::bad_alloc &) {
        threw++;
    }
    try {
        void *p = ::operator new[](g_huge);
        std::fprintf(stderr, "FAILED: operator new[](SIZE_MAX-4096) returned %p\n", p);
        return 1;
    } catch (const std::bad_alloc &) {
        threw++;
    }
    try {
        void *p = ::operator new(g_huge, std::align_val_t{64});
        std::fprintf(stderr, "FAILED: aligned operator new(huge) returned %p\n", p);
        return 1;
    } catch (const std::bad_alloc &) {
        threw++;
    }
    try {
        void *p = ::operator new[](g_huge, std::align_val_t{4096});
        std::fprintf(stderr, "FAILED: aligned operator new[](huge) returned %p\n", p);
        return 1;
    } catch (const std::bad_alloc &) {
        threw++;
    }
    EXPECT(threw == 4);
    EXPECT(::operator new(g_huge, std::nothrow) == nullptr);
    EXPECT(::operator new[](g_huge, std::nothrow) == nullptr);
    EXPECT(::operator new(g_huge, std::align_val_t{64}, std::nothrow) == nullptr);
    EXPECT(::operator new[](g_huge, std::align_val_t{64}, std::nothrow) == nullptr);

    // the new_handler is called before bad_alloc is thrown
    std::set_new_handler(new_handler);
    try {
        void *p = ::operator new(g_huge);
        std::fprintf(stderr, "FAILED: operator new(huge) returned %p\n", p);
        return 1;
    } catch (const std::bad_alloc &) {
    }
    if (handler_calls != 1) {
        std::fprintf(stderr, "FAILED: operator new(huge) called the new_handler "
                             "%d times before throwing (want 1)\n", handler_calls);
        return 1;
    }
    std::printf("cxx_operators: every operator new/delete form served by spry; "
                "failures throw / return nullptr\n");
    return 0;
}
