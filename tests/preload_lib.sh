# preload_lib.sh: sourced by the preload tests.
# Usage: source preload_lib.sh LIBSPRY PROBE
#   run_preloaded CMD...   runs CMD with libspry.so (and the probe) preloaded,
#                          stderr kept in $WORK/stderr.N; fails on a loader
#                          error
#   expect_served EXE_PATTERN
#                          fails unless processes whose executable matches
#                          EXE_PATTERN ran, and in each of them
#                          spry_owns(malloc(24)) was true
set -euo pipefail

LIBSPRY=$1
PROBE=$2
[ -f "$LIBSPRY" ] || { echo "FAILED: no $LIBSPRY"; exit 1; }
[ -f "$PROBE" ] || { echo "FAILED: no $PROBE"; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/spry-preload.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PROBE_DIR=$WORK/probes
mkdir -p "$PROBE_DIR"
RUN_N=0

fail() {
    echo "FAILED: $*" >&2
    exit 1
}

run_preloaded() {
    RUN_N=$((RUN_N + 1))
    local err=$WORK/stderr.$RUN_N rc=0
    LD_PRELOAD="$LIBSPRY $PROBE" SPRY_PROBE_DIR="$PROBE_DIR" "$@" 2>"$err" || rc=$?
    cat "$err" >&2
    if grep -q "cannot be preloaded\|cannot open shared object" "$err"; then
        fail "the loader could not preload libspry: $(grep -m1 'preload\|shared object' "$err")"
    fi
    return $rc
}

expect_served() {
    local pattern=$1
    local recs
    recs=$(cat "$PROBE_DIR"/probe.* 2>/dev/null | grep -E "exe=[^ ]*$pattern " || true)
    [ -n "$recs" ] || fail "no process matching '$pattern' ran with the probe preloaded (records: $(cat "$PROBE_DIR"/probe.* 2>/dev/null | cut -d' ' -f1 | sort | uniq -c | tr '\n' ' '))"
    # spry_owns=1: the block malloc() returned in that process is spry's
    # (malloc_from is informative only: for a non-PIE executable dladdr
    # names the executable's PLT)
    if echo "$recs" | grep -v " spry_owns=1" | grep -q .; then
        fail "a '$pattern' process did not get its malloc from spry: $(echo "$recs" | grep -v 'spry_owns=1' | head -1)"
    fi
    echo "served by spry: $(echo "$recs" | wc -l) process(es) of '$pattern'"
}
