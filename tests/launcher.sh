#!/usr/bin/env bash
# launcher.sh SPRY LAUNCHER_PROBE BUILD_DIR: the launcher `spry` (tools/spry.c)
# from the build tree and from an install: which library each command
# preloads, LD_PRELOAD kept, exit statuses and signals passed on, statistics
# as text and JSON (only the program's record, not its child's), the errors
# for a missing program and a missing cautious build.
set -u
spry=$1 probe=$2 build=$(realpath "$3")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "launcher: FAILED: $*" >&2; exit 1; }

# run CMD...: stdout, stderr and status in $work/out, $work/err, $rc
run() { "$@" >"$work/out" 2>"$work/err"; rc=$?; }
field() { sed -n "s/^$1 //p" "$work/out"; }
expect_rc() { [ "$rc" = "$1" ] || fail "$2: status $rc, want $1 (stderr: $(cat "$work/err"))"; }

# ---- run: libspry.so from the build tree, the program's status -----------
run "$spry" run -- "$probe" 0
expect_rc 0 "run"
[ "$(field malloc)" = "$build/libspry.so" ] || fail "run: malloc from '$(field malloc)', want $build/libspry.so"
[ "$(field spry_owns)" = 1 ] || fail "run: spry_owns says malloc's block is not spry's"
run "$spry" run "$probe" 42                  # no "--" needed
expect_rc 42 "run, exit status"
LD_PRELOAD=libm.so.6 run "$spry" run -- "$probe" 0
[ "$(field preload)" = "$build/libspry.so:libm.so.6" ] || fail "LD_PRELOAD not kept after spry: '$(field preload)'"
run "$spry" run -- "$probe" 0 kill
expect_rc 143 "run, death by SIGTERM"

# ---- errors ----------------------------------------------------------------
run "$spry" run -- "$work/no-such-program"
expect_rc 127 "missing program"
grep -q "no-such-program: No such file" "$work/err" || fail "missing program: stderr '$(cat "$work/err")'"
run "$spry" stats -- "$work/no-such-program"
expect_rc 127 "stats, missing program"
run "$spry" frobnicate -- "$probe" 0
expect_rc 2 "unknown command"
run "$spry" run
expect_rc 2 "no program"
for h in help --help; do
    run "$spry" $h
    expect_rc 0 "spry $h"
    grep -q "^usage: spry COMMAND" "$work/out" || fail "spry $h printed no usage"
done

# ---- debug: the cautious build beside libspry.so, or a clear error -------
mkdir "$work/only-fast"
ln -s "$build/libspry.so" "$work/only-fast/libspry.so"
run "$spry" debug --lib-dir "$work/only-fast" -- "$probe" 0
expect_rc 127 "debug without libspry-debug.so"
grep -q "libspry-debug.so not found" "$work/err" || fail "debug: stderr '$(cat "$work/err")'"
if [ -f "$build/libspry-debug.so" ]; then
    run "$spry" debug -- "$probe" 0
    expect_rc 0 "debug"
    [ "$(field malloc)" = "$build/libspry-debug.so" ] || fail "debug: malloc from '$(field malloc)'"
fi

# ---- stats: text on stderr, JSON on stdout, only the program's record ----
run "$spry" stats -- "$probe" 7 fork
expect_rc 7 "stats, exit status"
pid=$(field pid)
grep -q "^spry statistics (pid $pid):" "$work/err" || fail "stats: no text record for pid $pid: $(cat "$work/err")"
[ "$(grep -c "^spry statistics" "$work/err")" = 1 ] || fail "stats: the child's record printed too"
grep -q "^  in_use: [0-9]" "$work/err" || fail "stats: no in_use line"

run "$spry" stats --json -- "$probe" 0 fork
expect_rc 0 "stats --json"
pid=$(field pid)
# the program's own output comes first; the statistics are the last line
tail -n 1 "$work/out" | /usr/bin/python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
assert d["pid"] == int(sys.argv[1]), ("pid", d["pid"])
for k in ("in_use", "mapped", "committed", "segments", "heaps"):
    assert isinstance(d[k], int) and d[k] >= 0, (k, d.get(k))
assert d["mapped"] > 0 and d["in_use"] > 0
assert isinstance(d["walk"]["segments"], int)
assert d["options"]["SPRY_STATS"] == 2
' "$pid" || fail "stats --json: bad object: $(tail -n 1 "$work/out")"
grep -q "spry statistics\|{\"pid\"" "$work/err" && fail "stats --json: statistics on stderr"

run "$spry" stats --json -o "$work/stats.json" -- "$probe" 0
/usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))["in_use"]' "$work/stats.json" \
    || fail "stats -o: no JSON in the file"
run "$spry" stats -- "$probe" 0 kill
expect_rc 143 "stats, death by SIGTERM"
grep -q "left no statistics" "$work/err" || fail "stats, killed: stderr '$(cat "$work/err")'"
# found by a review: the statistics file was inherited by the program (fd 3),
# and a SIGTERM to the launcher left the program running and the file behind
TMPDIR=$work run "$spry" stats -- sh -c 'ls -l /proc/$$/fd'
grep -q spry-stats "$work/out" && fail "stats: the program inherited the statistics file: $(cat "$work/out")"
TMPDIR=$work "$spry" stats -- sleep 60 >"$work/out" 2>"$work/err" &
launcher=$!
for i in $(seq 200); do pgrep -P "$launcher" >/dev/null && break; sleep 0.05; done
program=$(pgrep -P "$launcher")
[ -n "$program" ] || fail "stats: no program under the launcher"
kill -TERM "$launcher"
wait "$launcher"; rc=$?
expect_rc 143 "stats, the launcher sent SIGTERM"
for i in $(seq 200); do kill -0 "$program" 2>/dev/null || break; sleep 0.05; done
kill -0 "$program" 2>/dev/null && { kill -KILL "$program"; fail "stats: the program outlived a SIGTERM to the launcher"; }
ls "$work"/spry-stats-* >/dev/null 2>&1 && fail "stats: the statistics file left behind after SIGTERM"

# ---- installed: <prefix>/bin/spry finds <prefix>/<libdir>/libspry.so -----
cmake --install "$build" --prefix "$work/prefix" >/dev/null || fail "cmake --install"
lib=$(find "$work/prefix" -name libspry.so | head -n 1)
[ -n "$lib" ] || fail "no libspry.so installed"
run "$work/prefix/bin/spry" run -- "$probe" 0
expect_rc 0 "installed run"
[ "$(field malloc)" = "$(realpath "$(dirname "$lib")")/libspry.so" ] || fail "installed: malloc from '$(field malloc)', want $lib"
SPRY_LIB_DIR=$work/only-fast run "$work/prefix/bin/spry" run -- "$probe" 0
[ "$(field malloc)" = "$(realpath "$work/only-fast")/libspry.so" ] || fail "SPRY_LIB_DIR: malloc from '$(field malloc)'"
echo "launcher: all checks passed"
