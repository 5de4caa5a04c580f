/* refuse_membarrier.h: a seccomp filter that fails membarrier with ENOSYS,
 * as old kernels and some sandboxes do, for the tests of spry without its
 * scavenger and idle collection. Exits 77 (skipped) where no filter can be
 * set; checks that the call is refused once it is. */
#ifndef SPRY_TEST_REFUSE_MEMBARRIER_H
#define SPRY_TEST_REFUSE_MEMBARRIER_H

#include "check.h"
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline void refuse_membarrier(const char *test)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_membarrier, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { sizeof f / sizeof f[0], f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        printf("%s: no seccomp filter here (%s): skipped\n", test, strerror(errno));
        exit(77);
    }
    CHECK(syscall(SYS_membarrier, 0, 0, 0) == -1 && errno == ENOSYS);
}

#endif
