/* spry: runs a program with spry preloaded.
 *
 *   spry run   -- prog args   libspry.so
 *   spry debug -- prog args   libspry-debug.so, the cautious build
 *   spry stats -- prog args   libspry.so, and its statistics at exit
 *
 * A C program rather than a shell script because it must find its own file
 * through symbolic links (/proc/self/exe), tell the statistics of its program
 * from those of the program's children (the library leads each record with
 * its pid, and only the program's pid is known for certain to a parent that
 * spawned it), and pass on a death by signal by dying of the same signal.
 * run and debug exec the program in place, so its exit status, signals and
 * terminal are its own.
 *
 * The libraries: --lib-dir DIR, else $SPRY_LIB_DIR, else the launcher's own
 * directory when libspry.so is there (the build tree), else SPRY_BIN_TO_LIB
 * from it (set by CMake: "../lib" for <prefix>/bin and <prefix>/lib). The
 * cautious build sits beside libspry.so. The launcher itself is an ordinary
 * program (glibc's malloc, stdio): nothing of spry runs in it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SPRY_BIN_TO_LIB
#define SPRY_BIN_TO_LIB "../lib"
#endif

extern char **environ;

/* Exit statuses of the launcher's own failures, as a shell's. */
enum { EXIT_USAGE = 2, EXIT_CANNOT_EXEC = 126, EXIT_NOT_FOUND = 127 };

static const char usage_text[] =
    "usage: spry COMMAND [OPTIONS] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Runs PROGRAM with the spry allocator preloaded (LD_PRELOAD; an LD_PRELOAD\n"
    "already set is kept, after spry). The exit status is PROGRAM's.\n"
    "\n"
    "commands:\n"
    "  run     preload libspry.so, the fast library\n"
    "  debug   preload libspry-debug.so, the cautious build (checks and reports\n"
    "          programming errors); status 127 if it is not installed\n"
    "  stats   preload libspry.so and print its statistics when PROGRAM exits:\n"
    "          text on stderr, or with --json one JSON object on stdout\n"
    "  help    this text\n"
    "\n"
    "options:\n"
    "  --lib-dir DIR   take the libraries from DIR (default: $SPRY_LIB_DIR, else\n"
    "                  found from where this launcher is: the build tree, or\n"
    "                  <prefix>/bin/" SPRY_BIN_TO_LIB ")\n"
    "  --json          stats: one JSON object (figures in bytes or counts,\n"
    "                  \"walk\" and \"options\" nested) instead of text\n"
    "  -o, --output F  stats: write them to file F instead\n"
    "  -h, --help      this text\n"
    "\n"
    "Statistics come from the library (SPRY_STATS, SPRY_STATS_FILE; see README):\n"
    "those of PROGRAM's children are left out, and a PROGRAM that ends by a\n"
    "signal or _exit leaves none.\n";

typedef struct args {
    const char *command;
    const char *lib_dir;
    const char *output;
    bool json;
    char **program;          /* NULL-terminated, as execvp wants it */
} args_t;

static void die(int status, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void die(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("spry: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(status);
}

static void usage_error(const char *what) {
    fprintf(stderr, "spry: %s\n\n%s", what, usage_text);
    exit(EXIT_USAGE);
}

/* Options may come before or after the command; the program starts at
 * "--" or at the first word after the command that is not an option. */
static args_t parse_args(int argc, char **argv) {
    args_t a = {0};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--") == 0) { a.program = &argv[i + 1]; break; }
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) { a.command = "help"; return a; }
        if (strcmp(s, "--json") == 0) { a.json = true; continue; }
        if (strcmp(s, "--lib-dir") == 0 || strcmp(s, "-o") == 0 || strcmp(s, "--output") == 0) {
            if (i + 1 >= argc) usage_error("an option lacks its value");
            if (strcmp(s, "--lib-dir") == 0) a.lib_dir = argv[++i];
            else a.output = argv[++i];
            continue;
        }
        if (strncmp(s, "--lib-dir=", 10) == 0) { a.lib_dir = s + 10; continue; }
        if (strncmp(s, "--output=", 9) == 0) { a.output = s + 9; continue; }
        if (s[0] == '-') usage_error("unknown option");
        if (!a.command) { a.command = s; continue; }
        a.program = &argv[i];
        break;
    }
    return a;
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The directory of libspry.so, absolute (the program may change its
 * working directory before the loader is done with LD_PRELOAD). */
static char *lib_dir(const args_t *a) {
    static char dir[PATH_MAX], lib[PATH_MAX + 16];
    const char *given = a->lib_dir ? a->lib_dir : getenv("SPRY_LIB_DIR");
    if (given && *given) {
        if (!realpath(given, dir)) die(EXIT_NOT_FOUND, "library directory %s: %s", given, strerror(errno));
        return dir;
    }
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0) die(EXIT_NOT_FOUND, "cannot find my own file (/proc/self/exe); use --lib-dir");
    dir[n] = 0;
    *strrchr(dir, '/') = 0;
    snprintf(lib, sizeof lib, "%s/libspry.so", dir);
    if (is_file(lib)) return dir;                          /* the build tree */
    size_t len = strlen(dir);
    snprintf(dir + len, sizeof dir - len, "/%s", SPRY_BIN_TO_LIB);
    char *installed = realpath(dir, NULL);                 /* <prefix>/lib */
    if (!installed) die(EXIT_NOT_FOUND, "no libspry.so beside me nor in %s; use --lib-dir", dir);
    snprintf(dir, sizeof dir, "%s", installed);
    free(installed);
    return dir;
}

/* LD_PRELOAD=<lib>[:what it was] */
static void preload(const char *lib) {
    if (strpbrk(lib, ": \t"))
        die(EXIT_NOT_FOUND, "cannot preload %s: the loader splits LD_PRELOAD at spaces and colons", lib);
    const char *old = getenv("LD_PRELOAD");
    char *value;
    if (old && *old) {
        if (asprintf(&value, "%s:%s", lib, old) < 0) die(EXIT_NOT_FOUND, "out of memory");
    } else {
        value = strdup(lib);
    }
    if (!value || setenv("LD_PRELOAD", value, 1) != 0) die(EXIT_NOT_FOUND, "cannot set LD_PRELOAD");
    free(value);
}

static int exec_failure_status(int err) {
    return err == ENOENT || err == ENOTDIR ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
}

/* ---- stats ---------------------------------------------------------------- */

/* The record of `pid` in the file's text: a JSON line led by {"pid":N, or a
 * text block led by "spry statistics (pid N):" up to the next record. */
static const char *find_record(const char *all, long pid, bool json, size_t *len) {
    char head[64];
    if (json) snprintf(head, sizeof head, "{\"pid\":%ld,", pid);
    else snprintf(head, sizeof head, "spry statistics (pid %ld):\n", pid);
    for (const char *line = all; *line; ) {
        const char *eol = strchr(line, '\n');
        const char *next = eol ? eol + 1 : line + strlen(line);
        if (strncmp(line, head, strlen(head)) == 0) {
            const char *end = next;
            if (!json)
                while (*end && strncmp(end, "spry statistics (pid ", 21) != 0) {
                    const char *e = strchr(end, '\n');
                    end = e ? e + 1 : end + strlen(end);
                }
            *len = (size_t)(end - line);
            return line;
        }
        line = next;
    }
    return NULL;
}

static char *read_all(int fd) {
    size_t cap = 16384, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) die(EXIT_NOT_FOUND, "out of memory");
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += (size_t)n;
        if (cap - len < 2) buf = realloc(buf, cap *= 2);
    }
    buf[len] = 0;
    return buf;
}

static void print_record(const args_t *a, int stats_fd, pid_t pid) {
    char *all = read_all(stats_fd);
    size_t len;
    const char *rec = find_record(all, (long)pid, a->json, &len);
    if (!rec) {
        fprintf(stderr, "spry: %s left no statistics (it ended by a signal or _exit, or is "
                        "statically linked)\n", a->program[0]);
    } else {
        FILE *out = a->json ? stdout : stderr;
        if (a->output && !(out = fopen(a->output, "w")))
            fprintf(stderr, "spry: %s: %s\n", a->output, strerror(errno));
        if (out) {
            fwrite(rec, 1, len, out);
            if (out != stdout && out != stderr) fclose(out);
            else fflush(out);
        }
    }
    free(all);
}

/* Dies of the program's signal (no core of the launcher), or exits with
 * its status. */
static void pass_status(int status) {
    if (WIFEXITED(status)) exit(WEXITSTATUS(status));
    int sig = WTERMSIG(status);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    exit(128 + sig);
}

/* The program while stats waits for it: a SIGTERM or SIGHUP sent to the
 * launcher goes on to it (a review: the launcher died and left the program
 * running, orphaned, and the statistics file behind). */
static volatile sig_atomic_t child_pid;

static void pass_on(int sig) {
    if (child_pid > 0) kill((pid_t)child_pid, sig);
}

static void run_with_stats(const args_t *a) {
    char path[PATH_MAX];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/spry-stats-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    /* close-on-exec: the program and what it starts do not inherit it */
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) die(EXIT_CANNOT_EXEC, "cannot make a file for the statistics (%s): %s", path, strerror(errno));
    setenv("SPRY_STATS", a->json ? "2" : "1", 1);
    setenv("SPRY_STATS_FILE", path, 1);
    /* the terminal's ^C and ^\ reach the program; the launcher stays to
     * report what it left (the program gets them as they were) */
    sigset_t dfl;
    sigemptyset(&dfl);
    if (signal(SIGINT, SIG_IGN) != SIG_IGN) sigaddset(&dfl, SIGINT);
    if (signal(SIGQUIT, SIG_IGN) != SIG_IGN) sigaddset(&dfl, SIGQUIT);
    /* SIGTERM and SIGHUP held until the program's pid is known (then
     * passed on); the program starts with them unblocked */
    sigset_t pass, old_mask;
    sigemptyset(&pass);
    sigaddset(&pass, SIGTERM);
    sigaddset(&pass, SIGHUP);
    sigprocmask(SIG_BLOCK, &pass, &old_mask);
    struct sigaction sa, was;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pass_on;
    sigemptyset(&sa.sa_mask);
    /* one ignored by whoever started us (nohup) stays ignored, for both */
    if (sigaction(SIGTERM, &sa, &was) == 0 && was.sa_handler == SIG_IGN) sigaction(SIGTERM, &was, NULL);
    if (sigaction(SIGHUP, &sa, &was) == 0 && was.sa_handler == SIG_IGN) sigaction(SIGHUP, &was, NULL);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigdefault(&attr, &dfl);
    posix_spawnattr_setsigmask(&attr, &old_mask);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    pid_t pid;
    int err = posix_spawnp(&pid, a->program[0], NULL, &attr, a->program, environ);
    posix_spawnattr_destroy(&attr);
    if (err) {
        unlink(path);
        die(exec_failure_status(err), "%s: %s", a->program[0], strerror(err));
    }
    child_pid = pid;
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) die(EXIT_CANNOT_EXEC, "waitpid: %s", strerror(errno));
    print_record(a, fd, pid);
    close(fd);
    unlink(path);
    pass_status(status);
}

int main(int argc, char **argv) {
    args_t a = parse_args(argc, argv);
    if (!a.command) usage_error("no command");
    if (strcmp(a.command, "help") == 0) { fputs(usage_text, stdout); return 0; }
    bool debug = strcmp(a.command, "debug") == 0, stats = strcmp(a.command, "stats") == 0;
    if (!debug && !stats && strcmp(a.command, "run") != 0) usage_error("unknown command");
    if (!a.program || !a.program[0]) usage_error("no program to run");
    if ((a.json || a.output) && !stats) usage_error("--json and --output go with stats");
    char lib[PATH_MAX + 32];
    const char *dir = lib_dir(&a);
    snprintf(lib, sizeof lib, "%s/%s", dir, debug ? "libspry-debug.so" : "libspry.so");
    if (!is_file(lib))
        die(EXIT_NOT_FOUND, "%s not found%s", lib,
            debug ? " (the cautious build of spry is not installed beside libspry.so)" : "");
    preload(lib);
    if (stats) run_with_stats(&a);
    execvp(a.program[0], a.program);
    die(exec_failure_status(errno), "%s: %s", a.program[0], strerror(errno));
}
