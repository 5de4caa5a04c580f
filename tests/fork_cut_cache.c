/* fork while another thread's block cache is being drained: the child's
 * thread that adopts that thread's heap gets every block once.
 *
 * A drain gives the top blocks of a class's stack back to their pages
 * before it moves the top; cut there by fork, the stack still reached them,
 * and through the links their pages had just given them, the pages' own
 * free lists. The child put all of it back on the free lists: blocks
 * twice on a list, handed out twice (a review; this test failed in 1 fork
 * of 20-200). Now a drain takes each block out of the stack before it goes
 * back (block_cache.c, bcache_give_back). And a carve cut between
 * listing fresh blocks and counting them carved left them listed and
 * uncarved: carved and handed out again in the child (3 runs of 8 failed
 * on a loaded machine); now they are counted first (page.c, page_carve).
 *
 * One thread mallocs 600 blocks of 2,000 B and frees them, again and again
 * (the cache holds 256: a drain every 128 frees); main forks every half
 * millisecond; each child starts a thread (it takes the dead thread's heap)
 * that mallocs 4,000 such blocks and checks that no two are the same. */
#include "check.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>

#define FORKS 300
#define SIZE  2000
#define ROUND 600
#define TAKE  4000

static atomic_int stop;

static void *churn(void *arg) {
    (void)arg;
    static void *a[ROUND];
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int i = 0; i < ROUND; i++) {
            a[i] = malloc(SIZE);
            CHECK(a[i] != NULL);
            memset(a[i], 1, 16);
        }
        for (int i = 0; i < ROUND; i++) free(a[i]);
    }
    return NULL;
}

static int by_address(const void *x, const void *y) {
    uintptr_t a = *(const uintptr_t *)x, b = *(const uintptr_t *)y;
    return a < b ? -1 : a > b;
}

static void *take(void *arg) {
    (void)arg;
    static void *b[TAKE];
    for (int i = 0; i < TAKE; i++) {
        b[i] = malloc(SIZE);
        CHECK(b[i] != NULL);
        memset(b[i], 2, SIZE);
    }
    qsort(b, TAKE, sizeof b[0], by_address);
    for (int i = 1; i < TAKE; i++)
        CHECKF((uintptr_t)b[i] - (uintptr_t)b[i - 1] >= SIZE, "block %p handed out twice (or overlapping %p)",
               b[i], b[i - 1]);
    return NULL;
}

int main(void) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, churn, NULL) == 0);
    for (int f = 0; f < FORKS; f++) {
        usleep(500);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            pthread_t c;
            if (pthread_create(&c, NULL, take, NULL) != 0) _exit(3);
            pthread_join(c, NULL);
            _exit(0);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork %d: child status %d", f, st);
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    printf("%d forks, every child's blocks distinct\n", FORKS);
    return 0;
}
