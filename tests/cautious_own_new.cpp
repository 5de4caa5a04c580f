// See cautious_own_new_lib.cpp: new and delete paired across a library that
// has its own operator new and delete built on malloc and free.
#include <cstdio>

struct Obj { int a[12]; };
Obj *own_new_make();
void own_new_drop(Obj *p);

int main() {
    for (int i = 0; i < 3; i++) {
        Obj *made_there = own_new_make();    // its new (malloc), our delete
        made_there->a[0] = i;
        delete made_there;
        Obj *made_here = new Obj();          // our new, its delete (free)
        made_here->a[1] = i;
        own_new_drop(made_here);
    }
    std::puts("survived");
    return 0;
}
