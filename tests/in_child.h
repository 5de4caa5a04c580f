/* in_child.h: runs a function in a forked child of its own (a process of
 * its own state: no purge thread yet, no trim yet, its own limits) and
 * requires that it exits 0; a hang ends it after 60 s (SIGALRM) and fails. */
#ifndef SPRY_TEST_IN_CHILD_H
#define SPRY_TEST_IN_CHILD_H

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static inline void run_in_child(void (*fn)(void), const char *name)
{
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(60);
        fn();
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: %s %d", name,
           WIFSIGNALED(st) ? "signal" : "exit status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

#endif
