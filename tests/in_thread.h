/* in_thread.h: runs a function in a thread of its own and waits for it (a
 * new thread gets a heap of its own, or takes a dormant one, and leaves it
 * dormant when it ends). */
#ifndef SPRY_TEST_IN_THREAD_H
#define SPRY_TEST_IN_THREAD_H

#include <pthread.h>

#include "check.h"

static inline void run_in_thread(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fn, arg) == 0);
    CHECK(pthread_join(t, NULL) == 0);
}

#endif
