// Wrong C++ programs for the cautious build: a release that does not match
// the allocation (delete of new[], delete of malloc, free of new). See
// cautious_wrong.c.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;
template <class T> static T *launder(T *p) { sink = p; return static_cast<T *>(sink); }

NOINLINE static int *array_site() { return new int[10]; }
NOINLINE static int *object_site() { return new int(7); }
NOINLINE static void *malloc_site() { return malloc(48); }

static void delete_of_array() { delete launder(array_site()); }
static void delete_of_malloc() { delete launder(static_cast<int *>(malloc_site())); }
static void free_of_new() { free(launder(object_site())); }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (!strcmp(argv[1], "delete_of_array")) delete_of_array();
    else if (!strcmp(argv[1], "delete_of_malloc")) delete_of_malloc();
    else if (!strcmp(argv[1], "free_of_new")) free_of_new();
    else return 2;
    std::printf("survived\n");
    return 0;
}
