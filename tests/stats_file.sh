#!/usr/bin/env bash
# stats_file.sh LIBSPRY [LIBSPRY_DEBUG]: SPRY_STATS_FILE as README promises: created 0600,
# appended to and never truncated, never opened through a symbolic link;
# each record valid JSON with SPRY_STATS=2 (a path option's bytes that are
# not UTF-8 made it invalid: a review) and written with one write(2) even
# when long path options make it bigger than 8 KiB (it went out in two:
# a review; checked where strace is installed).
set -u
lib=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "stats_file: FAILED: $*" >&2; exit 1; }
stats() { env SPRY_STATS=2 "$@" LD_PRELOAD="$lib" /bin/true; }

# created 0600, appended to, never truncated
f=$work/stats.json
stats SPRY_STATS_FILE="$f"
[ "$(stat -c %a "$f")" = 600 ] || fail "created with mode $(stat -c %a "$f"), want 600"
stats SPRY_STATS_FILE="$f"
[ "$(wc -l <"$f")" = 2 ] || fail "two runs left $(wc -l <"$f") records, want 2 (truncated?)"
/usr/bin/python3 -c 'import json, sys
for line in open(sys.argv[1]): json.loads(line)["in_use"]' "$f" || fail "a record is not JSON"

# never through a symbolic link (the target keeps its contents)
echo precious >"$work/target"
ln -s "$work/target" "$work/link"
stats SPRY_STATS_FILE="$work/link" 2>/dev/null
[ "$(cat "$work/target")" = precious ] || fail "written through a symbolic link"

# a FIFO: with no reader, a message and a prompt exit (the open waited
# for a reader for ever, at exit: a review); with one, the record reaches
# it. The same for the cautious build's SPRY_DEBUG_LOG when given.
mkfifo "$work/fifo"
out=$(timeout 30 env SPRY_STATS=2 SPRY_STATS_FILE="$work/fifo" LD_PRELOAD="$lib" /bin/true 2>&1)
rc=$?
[ $rc = 0 ] || fail "a FIFO with no reader: exit status $rc (124: it hung)"
case "$out" in *"cannot open SPRY_STATS_FILE"*FIFO*) ;; *) fail "a FIFO with no reader: said '$out'" ;; esac
timeout 30 cat "$work/fifo" >"$work/fifo.out" &
reader=$!
for _ in $(seq 300); do
    # until the reader has opened its end (before, the open fails at once)
    timeout 30 env SPRY_STATS=2 SPRY_STATS_FILE="$work/fifo" LD_PRELOAD="$lib" /bin/true 2>/dev/null
    [ -s "$work/fifo.out" ] && break
    kill -0 $reader 2>/dev/null || break
    sleep 0.1
done
wait $reader
/usr/bin/python3 -c 'import json, sys; json.loads(open(sys.argv[1]).readline())' "$work/fifo.out" \
    || fail "the record through a FIFO with a reader: '$(head -c 200 "$work/fifo.out")'"
if [ -n "${2:-}" ]; then
    # a leak to report opens the log
    out=$(timeout 30 env SPRY_DEBUG_LOG="$work/fifo" LD_PRELOAD="$2" /usr/bin/python3 -c 'import ctypes
ctypes.CDLL(None).malloc(100)' 2>&1)
    rc=$?
    [ $rc != 124 ] || fail "SPRY_DEBUG_LOG, a FIFO with no reader: it hung"
    case "$out" in *"cannot open SPRY_DEBUG_LOG"*FIFO*) ;; *) fail "SPRY_DEBUG_LOG, a FIFO with no reader: said '${out:0:300}'" ;; esac
fi

# a path option that is not UTF-8: still valid JSON (the byte as U+FFFD)
stats SPRY_STATS_FILE="$work/bytes.json" SPRY_DEBUG_LOG="$(printf 'x\377y\303\251')"
/usr/bin/python3 -c 'import json, sys
r = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
assert r["options"]["SPRY_DEBUG_LOG"] == "x\ufffdy\u00e9", r["options"]["SPRY_DEBUG_LOG"]' \
    "$work/bytes.json" || fail "a non-UTF-8 option: not the JSON expected: $(cat "$work/bytes.json")"

# long options: one record, whole
long=$(head -c 4000 /dev/zero | tr '\0' b)
deep=$work$(for i in $(seq 1900); do printf /.; done)/long.json
stats SPRY_STATS_FILE="$deep" SPRY_DEBUG_LOG="$long"
[ "$(wc -c <"$work/long.json")" -gt 8192 ] || fail "the long record is only $(wc -c <"$work/long.json") bytes"
/usr/bin/python3 -c 'import json, sys; json.loads(open(sys.argv[1]).read())' "$work/long.json" \
    || fail "the long record is not JSON"
if command -v strace >/dev/null 2>&1; then
    rm -f "$work/long.json"
    writes=$(strace -f -e trace=write -o "$work/trace" env SPRY_STATS=2 SPRY_STATS_FILE="$deep" \
        SPRY_DEBUG_LOG="$long" LD_PRELOAD="$lib" /bin/true && grep -c '^[0-9]* *write(' "$work/trace")
    [ "$writes" = 1 ] || fail "the long record took $writes writes: $(grep write "$work/trace" | cut -c1-80)"
    # the longest record: both path options 4,000 bytes that JSON escapes to
    # 6 each, and two class tables (every class live at a trim, which takes
    # the peak's table): 68 KiB went out in two writes past a 64 KiB buffer
    # (a review)
    ctl=$(head -c 250 /dev/zero | tr '\0' '\001')
    mkdir "$work/$ctl"
    esc=$work
    while [ $((${#esc} + 270)) -lt 4080 ]; do esc="$esc/$ctl/.."; done
    esc="$esc/esc.json"
    writes=$(strace -f -e trace=write -P "$work/esc.json" -o "$work/trace" env SPRY_STATS=2 \
        SPRY_STATS_FILE="$esc" SPRY_DEBUG_LOG="$(head -c 4000 /dev/zero | tr '\0' '\001')" LD_PRELOAD="$lib" \
        /usr/bin/python3 -c 'import ctypes
c = ctypes.CDLL(None)
c.malloc.restype = ctypes.c_void_p
keep, s = [], 8
while s <= 262144:
    keep.append(c.malloc(s))
    s += 8 if s < 64 else s // 16
c.malloc_trim(0)' && grep -c '^[0-9]* *write(' "$work/trace")
    size=$(wc -c <"$work/esc.json")
    [ "$size" -gt 65536 ] || fail "the longest record is only $size bytes"
    [ "$writes" = 1 ] || fail "the longest record ($size bytes) took $writes writes"
    /usr/bin/python3 -c 'import json, sys; r = json.loads(open(sys.argv[1], "rb").read().decode())
assert len(r["peak"]["classes"]) > 90, len(r["peak"]["classes"])' "$work/esc.json" \
        || fail "the longest record is not JSON with a full table at the peak"
fi
# a count is printed as a count however large (errors, purges, segments...
# were shown in KiB too from 10,240 on): 11,999 double frees reported
errors=$(env SPRY_STATS=1 SPRY_VERBOSE=0 LD_PRELOAD="$lib" /usr/bin/python3 -c '
import ctypes
c = ctypes.CDLL(None)
c.malloc.restype = ctypes.c_void_p
c.free.argtypes = [ctypes.c_void_p]
p = c.malloc(5000)
for _ in range(12000): c.free(p)' 2>&1 | grep '^  errors: ')
case "$errors" in
    "  errors: 11999  # "*) ;;
    *) fail "the errors line: '$errors', want 11999 as a plain count" ;;
esac
echo "stats_file: all checks passed"
