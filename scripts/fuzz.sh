#!/usr/bin/env bash
# The long run of the differential fuzzer (issue 7), for a developer before
# landing a change to spry's core: `make fuzz`, about 5 minutes.
#
#   scripts/fuzz.sh [BUILD] [FUZZ_BUILD]
#
# Runs tests/fuzz_diff (spry_* names, libspry.a) and fuzz_diff_plain
# (standard names, libspry.so) from BUILD with 1, 4 and 16 threads, one run
# with heavy thread churn, some with options that change when memory goes
# back (purges racing live blocks, or no purge thread), then, where clang
# has libFuzzer, the
# coverage-guided tests/fuzz_libfuzzer built in FUZZ_BUILD (its corpus is
# kept there, so each run starts where the last one stopped). Prints a
# summary; exits 1 when a run failed, with its log and the command that
# replays it.
#
# FUZZ_SEED=N      first seed (default: a new one each time, printed)
# FUZZ_SECONDS=S   length of each fuzz_diff run (default 30; libFuzzer 2x)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
fbuild=${2:-build-fuzz}
secs=${FUZZ_SECONDS:-30}
seed=${FUZZ_SEED:-$(( $(date +%s) % 1000000 ))}
logs=$build/fuzz-logs
mkdir -p "$logs"
start=$(date +%s)

# program threads life environment: ~20,000 steps per thread life, or 1,000
# for churn; "-" for no option
runs=(
  "fuzz_diff 1 20000 -"
  "fuzz_diff 4 20000 SPRY_PURGE_DELAY_MS=1"
  "fuzz_diff 16 20000 -"
  "fuzz_diff 16 1000 -"
  "fuzz_diff_plain 1 20000 SPRY_PURGE_THREAD=0"
  "fuzz_diff_plain 4 5000 -"
  "fuzz_diff_plain 16 20000 SPRY_PURGE_DELAY_MS=1"
)
for r in "${runs[@]}"; do
  read -r prog _ _ _ <<<"$r"
  [ -x "$build/tests/$prog" ] || { echo "fuzz: $build/tests/$prog is missing (make build)" >&2; exit 2; }
done
echo "fuzz: first seed $seed, $secs s per run; logs in $logs/ (FUZZ_SEED=$seed repeats this)"

summary=()
failed=0
# failed_run WHAT LOG TAIL_LINES: counts a failed run and shows its log's end
failed_run() {
  failed=$((failed + 1))
  summary+=("FAIL  $1")
  echo "---- $2 (tail)"; tail -n "$3" "$2"; echo "----"
}
i=0
for r in "${runs[@]}"; do
  read -r prog threads life envv <<<"$r"
  [ "$envv" = - ] && envv=""
  s=$((seed + i)); i=$((i + 1))
  log=$logs/$prog-t$threads-l$life-s$s.log
  what="${envv:+$envv }$prog --threads $threads --life $life --seed $s"
  echo "fuzz: $what ..."
  if env $envv "$build/tests/$prog" --seed "$s" --threads "$threads" --life "$life" \
       --ops 0 --seconds "$secs" >"$log" 2>&1; then
    # "..., N thread lives, M steps in X s, ..."
    result=$(sed -n 's/.* \([0-9]*\) thread lives, \([0-9]*\) steps in \([0-9.]*\) s.*/\2 steps, \1 thread lives, \3 s/p' "$log")
    summary+=("ok    $what: $result")
  else
    failed_run "$what: see $log" "$log" 12
  fi
done

# libFuzzer: clang's build of the coverage-guided entry point.
if command -v clang >/dev/null 2>&1; then
  flog=$logs/libfuzzer-s$seed.log
  if { [ -f "$fbuild/CMakeCache.txt" ] ||
       CC=clang CXX=clang++ cmake -S . -B "$fbuild" -DCMAKE_BUILD_TYPE=Release; } >"$flog" 2>&1 &&
     cmake --build "$fbuild" --target fuzz_libfuzzer -j "$(nproc)" >>"$flog" 2>&1 &&
     [ -x "$fbuild/tests/fuzz_libfuzzer" ]; then
    corpus=$fbuild/fuzz-corpus
    mkdir -p "$corpus"
    echo "fuzz: fuzz_libfuzzer for $((2 * secs)) s, corpus $corpus ..."
    # No purge thread: it would run instrumented code during other inputs
    # and blur the coverage that guides the mutations (allocator calls
    # purge inline instead). Inputs of up to 1 KiB (~170 calls) from the
    # start: short ones cannot reach states that take a sequence to build.
    if SPRY_PURGE_THREAD=0 "$fbuild/tests/fuzz_libfuzzer" -seed="$seed" \
         -max_total_time=$((2 * secs)) -max_len=1024 -len_control=0 \
         -artifact_prefix="$logs/" "$corpus" >>"$flog" 2>&1; then
      result=$(sed -n 's/^#\([0-9]*\)[[:space:]]*DONE[[:space:]]*cov: \([0-9]*\).*corp: \([0-9]*\).*/\1 inputs, coverage \2, corpus \3/p' "$flog" | tail -n 1)
      summary+=("ok    fuzz_libfuzzer -seed=$seed: $result")
    else
      failed_run "fuzz_libfuzzer -seed=$seed: see $flog (the input is $logs/crash-*)" "$flog" 20
    fi
  else
    summary+=("skip  fuzz_libfuzzer: clang cannot build it (see $flog)")
  fi
else
  summary+=("skip  fuzz_libfuzzer: no clang (apt-get install clang libclang-rt-dev)")
fi

echo
echo "fuzz summary (first seed $seed, $(( $(date +%s) - start )) s):"
printf '  %s\n' "${summary[@]}"
if [ "$failed" -gt 0 ]; then
  echo "fuzz: $failed run(s) FAILED"
  exit 1
fi
echo "fuzz: all runs passed"
