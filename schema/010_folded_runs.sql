-- 010_folded_runs.sql - folded instances stored as runs (issue 34;
-- docs/DESIGN.md, "Short-lived processes") and memory-map snapshots in a
-- rowid table.
--
-- folded: one row per run of at most 32 instances of a group (more only
-- when they share the last one's start, so that no two runs share a
-- key), where 005 had a row per instance (about 34 bytes; a run takes
-- about 10 an instance).
-- data is the instances sorted by (start, pid), each as varints: start
-- less the previous one's (the first's: first_ns), pid less the previous
-- pid (zigzag), exit less start (zigzag), and bytes as its 4 KiB pages
-- doubled, plus 1 and the remainder when not a whole page
-- (store_fold.c). n and last_exit let SQL count and pick runs without
-- decoding them; `sqlite3` counts a group's instances with sum(n).
--
-- This migration renames 005's table to v9_folded; the service's writer
-- then converts its rows into runs a group a transaction, deleting what
-- it converted, and drops it when it is empty (store_upgrade.c): a
-- conversion cut short goes on at the next start. Until it has ended,
-- only the service opens the database.
ALTER TABLE folded RENAME TO v9_folded;
CREATE TABLE folded(
    grp       INTEGER NOT NULL,  -- the group's processes row
    first_ns  INTEGER NOT NULL,  -- the start of its first instance
    last_exit INTEGER NOT NULL,  -- the latest exit of its instances
    n         INTEGER NOT NULL,  -- its instances
    data      BLOB NOT NULL,
    PRIMARY KEY (grp, first_ns)
) WITHOUT ROWID;

-- map_snapshots: the same columns in a rowid table. A snapshot of more
-- than about 1,000 bytes (a map of 80 ranges or more) spilled from a
-- WITHOUT ROWID table's page into overflow pages, mostly empty; a rowid
-- table keeps rows of up to about 4,000 bytes in its pages. The key
-- (proc, ts_ns) becomes a unique index.
CREATE TABLE map_snapshots_new(
    proc    INTEGER NOT NULL,
    ts_ns   INTEGER NOT NULL,  -- the instant the map shows (a bucket's end)
    nranges INTEGER NOT NULL,
    bytes   INTEGER NOT NULL,  -- committed bytes of the ranges
    ranges  BLOB NOT NULL,
    UNIQUE (proc, ts_ns)
);
INSERT INTO map_snapshots_new(proc, ts_ns, nranges, bytes, ranges)
    SELECT proc, ts_ns, nranges, bytes, ranges FROM map_snapshots ORDER BY ts_ns, proc;
DROP TABLE map_snapshots;
ALTER TABLE map_snapshots_new RENAME TO map_snapshots;
CREATE INDEX map_snapshots_ts ON map_snapshots(ts_ns);
