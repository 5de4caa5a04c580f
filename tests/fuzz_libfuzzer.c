/* fuzz_libfuzzer.c: libFuzzer's entry point to the differential fuzzer.
 * Each input is read as a sequence of steps of the shadow model
 * (fuzz_model.c), in one thread: its bytes choose the calls, the sizes, the
 * alignments and the blocks. spry's own sources are compiled for coverage
 * (-fsanitize=fuzzer-no-link), so mutations are steered toward paths of
 * the allocator no input took yet, which random streams reach rarely. At
 * the end of an input every block is audited and freed: inputs do not
 * depend on each other. A failed check aborts, and libFuzzer keeps the
 * input (`fuzz_libfuzzer crash-<hash>` replays it).
 *
 * Built only by clang (tests/CMakeLists.txt); `make fuzz` builds it in
 * build-fuzz and runs it for a bounded time (scripts/fuzz.sh). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fz_run run;
static struct fz_mailbox box;   /* one thread: it sends to itself */
static struct fz_table table;
static struct fz_block audit_buf[FZ_TABLE_CAP + FZ_MAILBOX_CAP];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        /* 64 MiB of live blocks at most: inputs stay fast */
        fz_run_init(&run, 0, (size_t)64 << 20, &box, 1, "fuzz_libfuzzer <the input>");
        run.crash = 1;
        ready = 1;
    }
    struct fz_thread t;
    fz_thread_init(&t, &run, &table, 0, 0, data, size);
    while (!t.exhausted)
        fz_step(&t);
    memcpy(audit_buf, table.b, table.count * sizeof *audit_buf);
    memcpy(audit_buf + table.count, box.b, box.count * sizeof *audit_buf);
    fz_audit(&t, audit_buf, table.count + box.count);
    fz_release_table(&t);
    fz_release_mailbox(&t, &box);
    return 0;
}
