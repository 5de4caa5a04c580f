/* malloc from a thread's last destructor round (issue 7, case 8). glibc
 * runs pthread key destructors in at most four rounds; a destructor that
 * sets its key again runs in the next round, after spry's own has made the
 * thread's heap dormant. Its mallocs must not leave a heap keyed to the dying
 * thread: after 200 such threads the process has one live heap (main's), a
 * handful of heaps in all, and the blocks allocated so late are valid and
 * can be freed by another thread. */
#include "check.h"
#include "alloc_api.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define THREADS 200
#define ROUNDS  4                   /* PTHREAD_DESTRUCTOR_ITERATIONS */

static pthread_key_t key;
static char *late_blocks[THREADS][ROUNDS];

typedef struct { int id; int round; } slot_t;

static void destructor(void *arg) {
    slot_t *s = arg;
    /* every round allocates, the last one included */
    char *p = A_malloc(100 + (size_t)s->round);
    CHECK(p != NULL);
    memset(p, s->id & 0x7f, 100);
    late_blocks[s->id][s->round] = p;
    A_free(A_malloc(3000));       /* and frees on the spot */
    /* a block realloc grows across 1 KiB: its span comes from a heap taken
     * for the call and left dormant again, which it must not count as the
     * thread's (alloc.c, realloc_span) */
    char *g = A_malloc(1000);
    CHECK(g != NULL);
    memset(g, 0x5a, 1000);
    g = A_realloc(g, 3000);
    CHECK(g != NULL && g[0] == 0x5a && g[999] == 0x5a);
    A_free(g);
    if (++s->round < ROUNDS) pthread_setspecific(key, s);
    else A_free(s);
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    char *warm = A_malloc(64);     /* this thread gets a heap */
    CHECK(warm != NULL);
    A_free(warm);
    slot_t *s = A_malloc(sizeof *s);
    CHECK(s != NULL);
    s->id = id;
    s->round = 0;
    /* created after spry's key, so it runs after spry's in each round */
    pthread_setspecific(key, s);
    return NULL;
}

int main(void) {
    A_free(A_malloc(16));          /* main's heap, and spry's key, first */
    CHECK(pthread_key_create(&key, destructor) == 0);
    for (int i = 0; i < THREADS; i++) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, worker, (void *)(intptr_t)i) == 0);
        CHECK(pthread_join(t, NULL) == 0);
    }
    spry_stats_t st;
    spry_stats_get(&st);
    CHECKF(st.heaps - st.heaps_abandoned == 1, "%zu live heaps after %d threads exited (want 1)",
           st.heaps - st.heaps_abandoned, THREADS);
    CHECKF(st.heaps <= 4, "%zu heaps made for %d sequential threads", st.heaps, THREADS);
    for (int i = 0; i < THREADS; i++)
        for (int r = 0; r < ROUNDS; r++) {
            char *p = late_blocks[i][r];
            CHECKF(p != NULL, "thread %d round %d: destructor did not run", i, r);
            for (int k = 0; k < 100; k++) CHECK(p[k] == (char)(i & 0x7f));
            A_free(p);
        }
    spry_trim();
    printf("late_destructor: %d threads, %d destructor rounds each; %zu heaps in all, 1 live\n",
           THREADS, ROUNDS, st.heaps);
    return 0;
}
