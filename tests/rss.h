/* rss.h: the process's resident set size, read from /proc/self/statm with
 * open/read only (no stdio, no allocation), so measuring does not call the
 * allocator under test. */
#ifndef SPRY_TEST_RSS_H
#define SPRY_TEST_RSS_H

#include <fcntl.h>
#include <stddef.h>
#include <unistd.h>

/* Field `index` (0: size, 1: resident) of /proc/self/statm, in bytes;
 * 0 when it cannot be read. */
static inline size_t statm_field_bytes(int index)
{
    char buf[256];
    ssize_t len;
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    size_t value = 0;
    int field = 0;
    if (fd < 0)
        return 0;
    len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
        return 0;
    buf[len] = 0;
    for (char *c = buf; *c; c++) {
        if (*c == ' ') {
            if (field == index)
                break;
            field++;
            value = 0;
        } else if (*c >= '0' && *c <= '9') {
            value = value * 10 + (size_t)(*c - '0');
        }
    }
    return value * (size_t)sysconf(_SC_PAGESIZE);
}

static inline size_t rss_bytes(void) { return statm_field_bytes(1); }
static inline size_t vm_size_bytes(void) { return statm_field_bytes(0); }

#define MiB ((size_t)1 << 20)

#endif /* SPRY_TEST_RSS_H */
