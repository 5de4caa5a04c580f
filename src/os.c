/* Linux primitives; see os.h for the contracts. */
#define _GNU_SOURCE
#include "os.h"
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/auxv.h>
#include <link.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <signal.h>
#include <pthread.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
#include <string.h>

static void *os_map(size_t size, size_t align, int flags) {
    /* Over-map by the alignment and trim both ends: two munmaps once per
     * arena, never on a hot path. */
    size_t over = size + (align > 4096 ? align : 0);
    if (over < size) { errno = ENOMEM; return NULL; }
    void *p = mmap(NULL, over, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) { errno = ENOMEM; return NULL; }
    uintptr_t base = (uintptr_t)p;
    uintptr_t aligned = (base + align - 1) & ~(uintptr_t)(align - 1);
    if (aligned > base) munmap(p, aligned - base);
    uintptr_t end = base + over, want_end = aligned + size;
    if (end > want_end) munmap((void *)want_end, end - want_end);
    return (void *)aligned;
}

void *spry_os_reserve(size_t size, size_t align) {
    return os_map(size, align, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
}

void *spry_os_map_block(size_t size, size_t align) {
    return os_map(size, align, MAP_PRIVATE | MAP_ANONYMOUS);
}

/* The calls below that report no failure to their caller leave errno as
 * they found it: free, and the allocator's other calls that succeed, must
 * not change it (POSIX says so of free), and a failed write of a report
 * (stderr closed: EBADF), a futex wait that found the lock released
 * (EAGAIN) or a membarrier probe (EPERM) left it changed (a review). */
#define OS_KEEP_ERRNO(call) do { int saved_errno_ = errno; call; errno = saved_errno_; } while (0)

void spry_os_release(void *p, size_t size) {
    OS_KEEP_ERRNO(munmap(p, size));
}

void spry_os_purge(void *p, size_t size) {
    /* MADV_DONTNEED, not MADV_FREE: lazily freed pages still count in RSS
     * until the kernel is under pressure, which users read as a leak. */
    OS_KEEP_ERRNO(madvise(p, size, MADV_DONTNEED));
}

bool spry_os_resident_map(void *p, size_t size, unsigned char *vec) {
    int rc;
    OS_KEEP_ERRNO(rc = mincore(p, size, vec));
    return rc == 0;
}

void spry_os_no_huge(void *p, size_t size) {
    OS_KEEP_ERRNO(madvise(p, size, MADV_NOHUGEPAGE));
}

void spry_os_huge(void *p, size_t size) {
    OS_KEEP_ERRNO(madvise(p, size, MADV_HUGEPAGE));
}

uint64_t spry_os_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t spry_os_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* A report or a statistics record written to a pipe whose reader is gone
 * must not kill the program (SIGPIPE: a review; `prog 2>&1 | head`, then a
 * double free): SIGPIPE is blocked for the write, and the one the write
 * raised is taken back, unless one was pending already. Cancellation is
 * off meanwhile: write and sigtimedwait are cancellation points, and a
 * thread with a cancel pending was cancelled in the middle of the free
 * that reported, inside the heap's guard where a collection of remote
 * frees reports (a review); the cancel acts at its next point instead. */
void spry_os_write(int fd, const char *s, size_t n) {
    int saved = errno;
    int cancel_was;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_was);
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    bool masked = pthread_sigmask(SIG_BLOCK, &pipe_set, &old) == 0;
    bool was_pending = !masked || (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE));
    bool broken = false;
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EPIPE) broken = true;
        if (w <= 0) break;
        s += w; n -= (size_t)w;
    }
    if (broken && !was_pending) {
        static const struct timespec now = {0, 0};
        sigtimedwait(&pipe_set, NULL, &now);
    }
    if (masked) pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_setcancelstate(cancel_was, NULL);
    errno = saved;
}

int spry_os_open_append(const char *path) {
    /* O_NONBLOCK: a FIFO with no reader fails at once (ENXIO), where the
     * open waited for one for ever, at exit, and retried through the
     * signals meant to end the process (a review); then writes block as
     * usual again */
    int fd;
    do fd = (int)syscall(SYS_openat, AT_FDCWD, path,
                         O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    while (fd < 0 && errno == EINTR);
    if (fd >= 0) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    }
    return fd;
}

const char *spry_os_open_error(int e) {
    switch (e) {
    case ELOOP:  return "a symbolic link, never followed";
    case ENOENT: return "no such directory";
    case EACCES: return "permission denied";
    case EPERM:  return "operation not permitted";
    case ENXIO:  return "a FIFO with no reader, or a device that is not there";
    case EISDIR: return "a directory";
    case EROFS:  return "a read-only file system";
    case ENOSPC: return "no space left";
    case ENAMETOOLONG: return "name too long";
    case ENOTDIR: return "a path component is not a directory";
    case EMFILE: case ENFILE: return "too many open files";
    default:     return "cannot be opened";
    }
}

/* open, read and close are cancellation points in libc: a thread with a
 * cancel pending would end inside malloc or free, maybe in spry's locks
 * (spry_init, a foreign pointer's first free). The system calls are not. */
void spry_os_close(int fd) { syscall(SYS_close, fd); }

/* Reads a small file into buf (NUL-terminated); no stdio, no malloc. */
static long os_read_small(const char *path, char *buf, size_t cap) {
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    long n = syscall(SYS_read, fd, buf, cap - 1);
    syscall(SYS_close, fd);
    if (n < 0) return -1;
    buf[n] = 0;
    return n;
}

static long os_parse_long(const char **s) {
    long v = 0;
    while (**s >= '0' && **s <= '9') { v = v * 10 + (**s - '0'); (*s)++; }
    return v;
}

int spry_os_thread_id(void) {
    return (int)syscall(SYS_gettid);
}

static bool os_thread_blocked(int tid) {
    char path[40] = "/proc/self/task/", digits[12];
    size_t len = strlen(path), n = 0;
    do { digits[n++] = (char)('0' + tid % 10); tid /= 10; } while (tid && n < sizeof digits);
    while (n) path[len++] = digits[--n];
    memcpy(path + len, "/stat", 6);
    /* "tid (comm) S ...": comm is at most 15 bytes, the state follows the
     * last ')' of the line's start */
    char buf[64];
    long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    long got = syscall(SYS_read, (int)fd, buf, sizeof buf - 1);
    syscall(SYS_close, (int)fd);
    if (got <= 0) return false;
    buf[got] = 0;
    const char *close = strrchr(buf, ')');
    if (!close || close[1] != ' ' || !close[2]) return false;
    return close[2] == 'S';
}

bool spry_os_thread_blocked(int tid) {
    bool blocked;
    OS_KEEP_ERRNO(blocked = tid > 0 && os_thread_blocked(tid));
    return blocked;
}

bool spry_os_address_limited(void) {
    struct rlimit r;
    return getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY;
}

/* The CPUs the process may run on. Through syscall, not glibc's
 * sched_getaffinity: that function lies in a part of libc's text no other
 * call of spry's or of a plain program reaches, and the page fault that
 * maps it in maps its 64 KiB neighbourhood too (fault-around): 64 KiB more
 * in the RSS of every process (measured with /proc/self/pagemap). The
 * kernel fills the mask's first bytes and returns their count. */
static int os_affinity_count(void) {
    uint64_t mask[1024 / 64] = {0};
    long got = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
    int n = 0;
    for (long w = 0; got > 0 && w < got / 8; w++) n += __builtin_popcountll(mask[w]);
    return n;
}

int spry_os_cpu_count(void) {
    int n = os_affinity_count();
    if (n <= 0) n = 1;
    /* cgroup v2: "max 100000" or "<quota> <period>" */
    char buf[128];
    if (os_read_small("/sys/fs/cgroup/cpu.max", buf, sizeof buf) > 0 && buf[0] != 'm') {
        const char *s = buf;
        long quota = os_parse_long(&s);
        while (*s == ' ') s++;
        long period = os_parse_long(&s);
        if (quota > 0 && period > 0) {
            long q = (quota + period - 1) / period;
            if (q < n) n = (int)q;
        }
    }
    return n;
}

void spry_os_wait_us(_Atomic(int) *addr, int expected, long timeout_us) {
    struct timespec ts, *tp = NULL;
    if (timeout_us >= 0) {
        ts.tv_sec = timeout_us / 1000000;
        ts.tv_nsec = (timeout_us % 1000000) * 1000L;
        tp = &ts;
    }
    OS_KEEP_ERRNO(syscall(SYS_futex, (int *)addr, FUTEX_WAIT_PRIVATE, expected, tp, NULL, 0));
}

void spry_os_wait(_Atomic(int) *addr, int expected, long timeout_ms) {
    spry_os_wait_us(addr, expected, timeout_ms < 0 ? -1 : timeout_ms * 1000);
}

void spry_os_wake(_Atomic(int) *addr) {
    OS_KEEP_ERRNO(syscall(SYS_futex, (int *)addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0));
}

void spry_os_wake_all(_Atomic(int) *addr) {
    OS_KEEP_ERRNO(syscall(SYS_futex, (int *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0));
}

void spry_os_yield(void) {
    sched_yield();
}

/* [lo, hi): empty until found. */
static uintptr_t loader_lo, loader_hi;

static bool loader_named(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "ld-", 3) == 0;
}

static int loader_look(struct dl_phdr_info *info, size_t size, void *at_base) {
    (void)size;
    uintptr_t base = (uintptr_t)at_base;
    if (base ? info->dlpi_addr != base : !(info->dlpi_name && loader_named(info->dlpi_name))) return 0;
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            loader_lo = info->dlpi_addr + ph->p_vaddr;
            loader_hi = loader_lo + ph->p_memsz;
        }
    }
    return 1;
}

void spry_os_find_loader(void) {
    dl_iterate_phdr(loader_look, (void *)getauxval(AT_BASE));
}

bool spry_os_in_loader(const void *code) {
    return (uintptr_t)code - loader_lo < loader_hi - loader_lo;
}

/* Whether the process is registered for the barrier: not yet (0), yes
 * (FENCE_READY: a barrier costs microseconds), or refused for good. */
enum { FENCE_READY = 1, FENCE_REFUSED = -1 };
static _Atomic(int) fence_state;

bool spry_os_fence_refused(void) { return atomic_load_explicit(&fence_state, memory_order_relaxed) == FENCE_REFUSED; }
bool spry_os_fence_ready(void) { return atomic_load_explicit(&fence_state, memory_order_relaxed) == FENCE_READY; }

static bool os_fence_all(void) {
    /* The process registers first. EPERM: not registered (spry loaded
     * into a process with threads running, or a C library that does not
     * say whether it has: see spry_os_fence_prepare_early), so register
     * and try again; -1 for good where the kernel (before 4.14) or a
     * sandbox refuses. */
    if (spry_os_fence_refused()) return false;
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) return true;
    if (errno == EPERM &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) {
        atomic_store_explicit(&fence_state, FENCE_READY, memory_order_relaxed);
        return true;
    }
    atomic_store_explicit(&fence_state, FENCE_REFUSED, memory_order_relaxed);
    return false;
}

void spry_os_fence_prepare(void) {
    /* refused: the first spry_os_fence_all finds out and says so */
    long rc = -1;
    if (!spry_os_fence_refused())
        OS_KEEP_ERRNO(rc = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0));
    if (rc == 0) atomic_store_explicit(&fence_state, FENCE_READY, memory_order_relaxed);
}

/* glibc's (2.32 and later): nonzero while the process has one thread.
 * Weak: a C library without it (musl) leaves it NULL. */
extern char __libc_single_threaded __attribute__((weak));

/* With one thread the kernel registers at once (3 us measured); with two or
 * more it waits for an RCU grace period first (10-14 ms, this 6.18 kernel,
 * 2 CPUs), and a registration at the first hurried look held the purge
 * thread that long: a program's second thread, starting its turn as the
 * first went to sleep, took 5-17 MiB fresh before the look that would have
 * lent it the first one's memory (bench turns, 32-256 KiB). A fork child
 * keeps the registration (its address space is a copy), and an exec'd
 * program's load registers again. */
void spry_os_fence_prepare_early(void) {
    if (&__libc_single_threaded && __libc_single_threaded) spry_os_fence_prepare();
}

bool spry_os_fence_all(void) {
    bool done;
    OS_KEEP_ERRNO(done = os_fence_all());
    return done;
}

static bool os_readable(void *dst, const void *p, size_t n) {
    /* The kernel copies for us and says EFAULT where a plain load would
     * fault (unmapped or PROT_NONE). Where a sandbox refuses the call
     * (EPERM, ENOSYS), mincore at least tells mapped from unmapped. */
    struct iovec local = { dst, n }, remote = { (void *)p, n };
    ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (got == (ssize_t)n) return true;
    if (got >= 0 || errno == EFAULT || errno == ESRCH) return false;
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)4095, hi = ((uintptr_t)p + n + 4095) & ~(uintptr_t)4095;
    unsigned char vec[4];
    if (hi <= lo || hi - lo > sizeof vec * 4096) return false;
    if (mincore((void *)lo, hi - lo, vec) != 0) return false;
    for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = ((const uint8_t *)p)[i];
    return true;
}

bool spry_os_readable(void *dst, const void *p, size_t n) {
    bool done;
    OS_KEEP_ERRNO(done = os_readable(dst, p, n));
    return done;
}

void spry_os_brk_range(uintptr_t *start, uintptr_t *end) {
    static _Atomic(uintptr_t) brk_start;    /* 1: unknown */
    uintptr_t s = atomic_load_explicit(&brk_start, memory_order_relaxed);
    if (s == 0) {
        /* /proc/self/stat: "pid (comm) state ..." with start_brk the 47th
         * field; comm may hold spaces, so count from the last ')'. */
        char buf[1024];
        s = 1;
        if (os_read_small("/proc/self/stat", buf, sizeof buf) > 0) {
            const char *c = buf, *close = NULL;
            for (; *c; c++) if (*c == ')') close = c;
            if (close) {
                int field = 2;
                for (c = close + 1; *c && field < 47; c++) if (*c == ' ') field++;
                if (field == 47) {
                    uintptr_t v = (uintptr_t)os_parse_long(&c);
                    if (v) s = v;
                }
            }
        }
        atomic_store_explicit(&brk_start, s, memory_order_relaxed);
    }
    *start = s == 1 ? 0 : s;
    *end = (uintptr_t)sbrk(0);
}
