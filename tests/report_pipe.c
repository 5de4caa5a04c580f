/* A report (here of a double free) written to a pipe whose reader is gone
 * must not kill the program with SIGPIPE (a review: `prog 2>&1 | head`,
 * then a double free, and the program died of the report), and must leave
 * the program's own SIGPIPE as it was:
 * - stderr a broken pipe, SIGPIPE's default action: the program lives on;
 * - a SIGPIPE the program had pending (blocked) is still pending after;
 * - the program's own write to the pipe afterwards still raises SIGPIPE.
 * Each case in a child of its own. */
#include "check.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stderr_broken_pipe(void) {
    int pf[2];
    CHECK(pipe(pf) == 0);
    close(pf[0]);
    CHECK(dup2(pf[1], 2) == 2);
}

static void double_free(void) {
    void *volatile p = malloc(100);
    CHECK(p != NULL);
    free(p);
    free(p);
}

static void lives_on(void) {
    stderr_broken_pipe();
    double_free();
    double_free();
}

static void pending_kept(void) {
    sigset_t pipe_set, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    CHECK(sigprocmask(SIG_BLOCK, &pipe_set, NULL) == 0);
    stderr_broken_pipe();
    CHECK(write(2, "x", 1) == -1);        /* the program's own: SIGPIPE pending */
    double_free();
    CHECK(sigpending(&pending) == 0);
    CHECK(sigismember(&pending, SIGPIPE));
}

static void own_write_still_signals(void) {
    stderr_broken_pipe();
    double_free();
    (void)!write(2, "x", 1);              /* dies here */
    _exit(7);
}

/* The child's status: exit code, or 128 + the signal that ended it. */
static int run(void (*fn)(void)) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        fn();
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(void) {
    int s = run(lives_on);
    CHECKF(s == 0, "double frees reported to a broken pipe: status %d (141: SIGPIPE)", s);
    s = run(pending_kept);
    CHECKF(s == 0, "the program's pending SIGPIPE: status %d", s);
    s = run(own_write_still_signals);
    CHECKF(s == 128 + SIGPIPE, "the program's own write to the broken pipe: status %d, want %d", s,
           128 + SIGPIPE);
    printf("report_pipe: reports to a broken pipe leave the program and its SIGPIPE alone\n");
    return 0;
}
