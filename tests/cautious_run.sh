#!/usr/bin/env bash
# cautious_run.sh LIBSPRY_DEBUG STATUS [VAR=VALUE...] -- CMD... -- REGEX...:
# runs CMD with libspry-debug.so preloaded (and the variables set) and its
# reports in a temporary SPRY_DEBUG_LOG; requires exit status STATUS
# (134: SIGABRT) and every REGEX to match the report (grep -P over the
# whole report: [^\n]* stays on a line, (?s) lets . cross lines). A REGEX
# starting with '!' must not match.
set -u
lib=$1 want=$2
shift 2
envs=()
while [ "$1" != "--" ]; do envs+=("$1"); shift; done
shift
cmd=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do cmd+=("$1"); shift; done
[ $# -gt 0 ] && shift
work=$(mktemp -d /tmp/spry-cautious-XXXXXX)
trap 'rm -rf "$work"' EXIT
log=$work/report.log
(cd "$work" && exec env "${envs[@]}" SPRY_DEBUG_LOG="$log" LD_PRELOAD="$lib" "${cmd[@]}") \
    >"$work/stdout" 2>"$work/stderr"
status=$?
fail() {
    echo "FAIL: $*"
    echo "---- report"; cat "$log" 2>/dev/null
    echo "---- stdout"; cat "$work/stdout"
    echo "---- stderr"; tail -20 "$work/stderr"
    exit 1
}
[ "$status" = "$want" ] || fail "exit status $status, want $want"
for re in "$@"; do
    if [ "${re:0:1}" = "!" ]; then
        grep -Pzq -- "${re:1}" "$log" 2>/dev/null && fail "the report matches '${re:1}'"
    else
        grep -Pzq -- "$re" "$log" 2>/dev/null || fail "the report does not match '$re'"
    fi
done
echo "ok: ${cmd[*]}: status $status, $(grep -c 'ERROR:' "$log" 2>/dev/null || true) error reports"
