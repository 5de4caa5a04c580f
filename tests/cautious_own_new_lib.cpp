// A library with an operator new and delete of its own, built on malloc and
// free and bound inside it (-Bsymbolic, as LLVM's libLLVM is): its new
// reaches the cautious build as malloc, its delete as free. The program
// (cautious_own_new.cpp) deletes what this library made with new, and this
// library deletes what the program made; each pairing is right at the
// source level, and the cautious build must not call it mismatched.
#include <cstdlib>
#include <new>

void *operator new(std::size_t n) {
    if (void *p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }

struct Obj { int a[12]; };

__attribute__((visibility("default"))) Obj *own_new_make() { return new Obj(); }
__attribute__((visibility("default"))) void own_new_drop(Obj *p) { delete p; }
