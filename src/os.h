/* The one door to the kernel. Nothing else in spry calls mmap, munmap,
 * madvise, futex or reads /proc and /sys.
 *
 * Contracts:
 *  spry_os_reserve(size, align): a fresh read/write anonymous mapping of
 *    `size` bytes (a multiple of 4 KiB) whose start is a multiple of `align`
 *    (a power of two >= 4 KiB). Zero-filled, not yet resident. NULL with errno
 *    ENOMEM when the kernel refuses. Release it with exactly (result, size).
 *    Not counted against the kernel's overcommit limit (MAP_NORESERVE):
 *    arenas reserve address space far beyond what they use.
 *  spry_os_map_block(size, align): the same for one block's own mapping,
 *    counted: the kernel's overcommit policy answers as it does for
 *    glibc's mappings (malloc of 64 TiB on a 24 GiB machine succeeded,
 *    where glibc's is refused: a review).
 *  spry_os_release(p, size): unmaps; p/size exactly as reserved.
 *  spry_os_purge(p, size): the range stays mapped and reads back as zeros;
 *    its memory is returned at once (MADV_DONTNEED, so RSS really drops).
 *  spry_os_no_huge(p, size): asks the kernel not to back the range with
 *    transparent huge pages (a sparse 4 MiB segment would become resident). */
#ifndef SPRY_OS_H
#define SPRY_OS_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdatomic.h>

void    *spry_os_reserve(size_t size, size_t align);
void    *spry_os_map_block(size_t size, size_t align);
void     spry_os_release(void *p, size_t size);
void     spry_os_purge(void *p, size_t size);
void     spry_os_no_huge(void *p, size_t size);
void     spry_os_huge(void *p, size_t size);
/* Which 4 KiB pages of [p, p + size) are resident now: bit 0 of vec[i]
 * for page i (p and size multiples of 4 KiB); false when the kernel will
 * not say. Statistics only. */
bool     spry_os_resident_map(void *p, size_t size, unsigned char *vec);
uint64_t spry_os_now_ms(void);
/* The same in microseconds. */
uint64_t spry_os_now_us(void);
void     spry_os_write(int fd, const char *s, size_t n);
/* Opens a file for appending (created 0600 when missing, never truncated,
 * never through a symbolic link, never waiting for a FIFO's reader); -1
 * with errno on failure. */
int      spry_os_open_append(const char *path);
/* What an errno of spry_os_open_append means, in a few words (no strerror:
 * its translation may allocate). */
const char *spry_os_open_error(int e);
void     spry_os_close(int fd);
/* CPUs this process may run on: the affinity mask, capped by a cgroup v2
 * cpu.max quota. */
int      spry_os_cpu_count(void);
/* The calling thread's kernel id (gettid). */
int      spry_os_thread_id(void);
/* Whether thread `tid` of this process is blocked: asleep in the kernel,
 * waiting for an event (state S of /proc/self/task/<tid>/stat), not
 * running nor waiting for a CPU nor in an uninterruptible wait (a page
 * fault's I/O); false when that cannot be read. Raw system calls: no
 * cancellation point. */
bool     spry_os_thread_blocked(int tid);
/* Whether the process runs under an address-space limit (RLIMIT_AS). */
bool     spry_os_address_limited(void);
/* Sleep on *addr while it equals `expected`, at most timeout_ms (<0: no
 * limit). Wake one sleeper, or all of them. */
void     spry_os_wait(_Atomic(int) *addr, int expected, long timeout_ms);
void     spry_os_wait_us(_Atomic(int) *addr, int expected, long timeout_us);
void     spry_os_wake(_Atomic(int) *addr);
void     spry_os_wake_all(_Atomic(int) *addr);
/* Lets another runnable thread of this CPU run first (sched_yield). */
void     spry_os_yield(void);
/* Finds the dynamic loader's code (ld.so's executable segment: the object
 * at AT_BASE, or, when ld.so was run as the program and AT_BASE is 0, the
 * loaded object named ld-*; none in a static program). Once, at init. */
void     spry_os_find_loader(void);
/* Whether `code` lies in it. */
bool     spry_os_in_loader(const void *code);
/* Makes every running thread of the process execute a full memory barrier
 * before it returns (membarrier, private expedited); false when the kernel
 * offers no such call. */
bool     spry_os_fence_all(void);
/* Registers the process for spry_os_fence_all, which otherwise registers
 * at its first call: the kernel then waits for an RCU grace period (a
 * hurried look's first barrier took over 13 ms in a test's child). */
void     spry_os_fence_prepare(void);
/* The same where it costs next to nothing: while the process has one
 * thread (at load, as a rule), as far as the C library can tell. */
void     spry_os_fence_prepare_early(void);
/* True once the process is registered (spry_os_fence_all is then cheap). */
bool     spry_os_fence_ready(void);
/* True once spry_os_fence_all was refused for good. */
bool     spry_os_fence_refused(void);
/* Copies [p, p+n) (n <= 16 KiB) to dst if it can be read without a fault;
 * false otherwise. System calls (process_vm_readv, or mincore where a
 * sandbox refuses that): for rare paths only. */
bool     spry_os_readable(void *dst, const void *p, size_t n);
/* The program break's range [start, current end) (start from
 * /proc/self/stat, read once; 0 when unknown). */
void     spry_os_brk_range(uintptr_t *start, uintptr_t *end);

#endif
