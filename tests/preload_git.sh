#!/usr/bin/env bash
# preload_git.sh LIBSPRY PROBE: git builds a repository (a few hundred files,
# several commits with changes, renames and deletions), then log, diff, gc
# and fsck, every git process under spry. With fixed dates the commit ids
# are deterministic: the output must equal that of the same run without
# spry, and every command must exit 0.
source "$(dirname "$0")/preload_lib.sh" "$1" "$2"
command -v git >/dev/null || fail "git is not installed"
export HOME=$WORK GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=spry GIT_AUTHOR_EMAIL=spry@example.com
export GIT_COMMITTER_NAME=spry GIT_COMMITTER_EMAIL=spry@example.com
export GIT_AUTHOR_DATE='2024-01-01T00:00:00Z' GIT_COMMITTER_DATE='2024-01-01T00:00:00Z'

# must CMD...: runs CMD; a non-zero status ends the scenario (it runs in a
# subshell, where set -e would not apply)
must() {
    "$@" || { echo "FAILED: '$*' exited with status $?"; exit 1; }
}

# scenario DIR RUNNER: RUNNER is "" (plain) or run_preloaded
scenario() {
    local dir=$1 g=$2
    mkdir -p "$dir" && cd "$dir"
    must $g git init -q -b main .
    for d in $(seq 0 9); do
        mkdir -p "dir$d"
        for f in $(seq 0 39); do
            awk -v d=$d -v f=$f 'BEGIN { for (i = 0; i < (d * 40 + f) % 200 + 5; i++)
                printf "line %d of file %d/%d: %x\n", i, d, f, (i * 2654435761 + f) % 4294967296 }' \
                >"dir$d/file$f.txt"
        done
    done
    must $g git add -A
    must $g git commit -q -m "initial: 400 files"
    for c in 1 2 3 4 5; do
        for f in $(seq $c 7 399); do
            [ -d "dir$((f / 40))" ] && echo "change $c" >>"dir$((f / 40))/file$((f % 40)).txt"
        done
        if [ $c = 3 ]; then must $g git mv dir1 dir1-renamed; fi
        if [ $c = 4 ]; then must $g git rm -q -r -f dir2; fi
        must $g git add -A
        must $g git commit -q -m "change $c"
    done
    must $g git log --stat --format='%H %s' >../log-stat.$g.txt
    md5sum <../log-stat.$g.txt
    must $g git log --format='%H %s'
    must $g git diff --stat HEAD~4 HEAD >../diff.txt
    tail -1 ../diff.txt
    must $g git gc -q
    must $g git fsck --full --strict
    must $g git count-objects -v >../count.txt
    grep -E '^(count|in-pack|packs)' ../count.txt
    must $g git rev-parse HEAD
    must $g git status --porcelain >../status.txt
    wc -l <../status.txt
    cd "$WORK"
}

(scenario "$WORK/ref" "") >"$WORK/ref.out" 2>&1 || fail "git without spry failed: $(tail -3 "$WORK/ref.out")"
rc=0
(scenario "$WORK/spry" run_preloaded) >"$WORK/spry.out" 2>&1 || rc=$?
[ $rc -eq 0 ] || fail "a git command under spry exited with status $rc: $(tail -5 "$WORK/spry.out")"
if ! diff -u "$WORK/ref.out" "$WORK/spry.out"; then
    fail "git's output under spry differs from its output without spry"
fi
echo "git: $(grep -c ' ' "$WORK/spry.out") lines of output identical with and without spry"
expect_served '/git'
