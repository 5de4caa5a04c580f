/* check.h: the tests' assertion helper.
 *
 * A failed check prints file:line, the expression and its values to stderr
 * and ends the process with status 1 at once (_exit: no atexit handlers, so a
 * failure inside a thread or a fork child cannot hang in a broken allocator).
 * The checks never allocate: they format with fprintf on stderr (unbuffered).
 */
#ifndef SPRY_TEST_CHECK_H
#define SPRY_TEST_CHECK_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void check_die(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
static void check_die(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: FAILED: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    fflush(stdout);
    _exit(1);
}

/* CHECK(cond): plain condition. */
#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond))                                                          \
            check_die(__FILE__, __LINE__, "%s", #cond);                       \
    } while (0)

/* CHECKF(cond, fmt, ...): condition with a message that gives the values. */
#define CHECKF(cond, ...)                                                     \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: FAILED: %s\n    ", __FILE__, __LINE__,    \
                    #cond);                                                   \
            check_die(__FILE__, __LINE__, __VA_ARGS__);                       \
        }                                                                     \
    } while (0)

/* CHECK_OP(a, op, b): integer comparison, both values printed. */
#define CHECK_OP(a, op, b)                                                    \
    do {                                                                      \
        unsigned long long check_a_ = (unsigned long long)(a);                \
        unsigned long long check_b_ = (unsigned long long)(b);                \
        if (!(check_a_ op check_b_))                                          \
            check_die(__FILE__, __LINE__,                                     \
                      "%s %s %s  (%llu [0x%llx] vs %llu [0x%llx])", #a, #op,  \
                      #b, check_a_, check_a_, check_b_, check_b_);            \
    } while (0)

#define CHECK_EQ(a, b) CHECK_OP(a, ==, b)
#define CHECK_NE(a, b) CHECK_OP(a, !=, b)
#define CHECK_LE(a, b) CHECK_OP(a, <=, b)
#define CHECK_LT(a, b) CHECK_OP(a, <, b)
#define CHECK_GE(a, b) CHECK_OP(a, >=, b)
#define CHECK_GT(a, b) CHECK_OP(a, >, b)

/* CHECK_NOTNULL(p): pointer must be non-NULL (errno printed). */
#define CHECK_NOTNULL(p)                                                      \
    do {                                                                      \
        if ((p) == NULL)                                                      \
            check_die(__FILE__, __LINE__, "%s is NULL (errno %d: %s)", #p,    \
                      errno, strerror(errno));                                \
    } while (0)

/* CHECK_ALIGNED(p, a): (uintptr_t)p is a multiple of a. */
#define CHECK_ALIGNED(p, a)                                                   \
    do {                                                                      \
        uintptr_t check_p_ = (uintptr_t)(p);                                  \
        uintptr_t check_al_ = (uintptr_t)(a);                                 \
        if (check_p_ % check_al_ != 0)                                        \
            check_die(__FILE__, __LINE__, "%s = %p is not %zu-byte aligned",  \
                      #p, (void *)check_p_, (size_t)check_al_);               \
    } while (0)

/* The alignment every block of n bytes must have (spry.h): 16 for n >= 16,
 * otherwise 8. */
static inline size_t check_min_align(size_t n)
{
    return n >= 16 ? 16 : 8;
}

#endif /* SPRY_TEST_CHECK_H */
