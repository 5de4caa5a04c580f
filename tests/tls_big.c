/* A library with 1 MiB of thread-local storage, for tls_joins: dlopen'ed,
 * its TLS is allocated by the dynamic loader (through malloc) in each
 * thread that touches it, and freed by the loader when the thread is
 * joined. */
#include <string.h>

static __thread char big[1 << 20];

void tls_big_touch(void) {
    memset(big, 1, sizeof big);
}
