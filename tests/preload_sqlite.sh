#!/usr/bin/env bash
# preload_sqlite.sh LIBSPRY PROBE: sqlite3 builds a database of some MB
# (200,000 rows inserted in one transaction, an index, updates, deletes,
# VACUUM) and answers aggregate queries; the output under spry must equal
# the output of the same run without it.
source "$(dirname "$0")/preload_lib.sh" "$1" "$2"
command -v sqlite3 >/dev/null || fail "sqlite3 is not installed"
cd "$WORK"
{
    echo "CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, val REAL, b BLOB);"
    echo "BEGIN;"
    awk 'BEGIN { for (i = 1; i <= 200000; i++)
        printf "INSERT INTO t VALUES(%d, %d, '"'"'n%08x-%d'"'"', %.6f, zeroblob(%d));\n",
               i, (i * 7919) % 1000, (i * 2654435761) % 4294967296, i % 97, i / 7.0, i % 40 }'
    echo "COMMIT;"
    cat <<'SQL'
CREATE INDEX t_grp ON t(grp, name);
SELECT count(*), sum(grp), printf('%.3f', sum(val)), sum(length(b)) FROM t;
SELECT grp, count(*), min(name), max(name) FROM t GROUP BY grp ORDER BY grp LIMIT 20;
SELECT name FROM t ORDER BY name DESC LIMIT 5;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000)
  SELECT count(*), sum(length(printf('%x-%s', x, x * x))) FROM c;
UPDATE t SET name = name || '-updated' WHERE id % 7 = 0;
DELETE FROM t WHERE id % 11 = 0;
SELECT count(*), sum(length(name)) FROM t;
SELECT a.grp, count(*) FROM t a JOIN t b ON a.id = b.id + 1
  WHERE a.grp % 10 = b.grp % 10 GROUP BY a.grp ORDER BY 2 DESC, 1 LIMIT 5;
SELECT group_concat(name, ',') IS NOT NULL, length(group_concat(name, ',')) FROM t WHERE grp < 50;
VACUUM;
PRAGMA integrity_check;
SELECT page_count * page_size >= 4000000 FROM pragma_page_count, pragma_page_size;
SQL
} >script.sql

rm -f ref.db spry.db
sqlite3 ref.db <script.sql >ref.out 2>&1 || fail "sqlite3 without spry failed: $(tail -3 ref.out)"
rc=0
run_preloaded sqlite3 spry.db <script.sql >spry.out 2>&1 || rc=$?
[ $rc -eq 0 ] || fail "sqlite3 under spry exited with status $rc: $(tail -3 spry.out)"
if ! diff -u ref.out spry.out; then
    fail "sqlite3's output under spry differs from its output without spry"
fi
grep -qx ok spry.out || fail "PRAGMA integrity_check did not say ok"
[ "$(tail -1 spry.out)" = 1 ] || fail "the database is smaller than 4 MB"
echo "sqlite3: $(du -k spry.db | cut -f1) KiB database, $(wc -l <spry.out) lines of output identical with and without spry"
expect_served 'sqlite3'
