-- 009_cells.sql - cells: one row per (tier, bucket, proc, layer) for what
-- the tables commits, releases and activity of 001_initial held in rows
-- per (proc, stack[, a]) (docs/DESIGN.md, "Cells"; issue 34).
--
-- A cell's commits and releases, per stack, are the BLOB data (cells.c,
-- a varint encoding of about 4 - 8 bytes a stack); the process's activity
-- of the bucket and the sums of its commit and release bytes are columns.
-- The readers read the rows through the temp views commits, releases and
-- activity that each connection of commitwatch creates over this table
-- (they decode data with the functions cw_commit_rows and
-- cw_release_rows, registered on its connections). For `sqlite3`, the
-- views commit_cells and heap_cells below name every column of a layer
-- and decode nothing.
--
-- This migration renames the old tables to v8_commits, v8_releases and
-- v8_activity; the service's writer then converts their rows into cells a
-- range of buckets a transaction, deleting what it converted, and drops
-- them when they are empty (store_upgrade.c): a conversion cut short goes
-- on at the next start. Until it has ended, only the service opens the
-- database.
CREATE TABLE cells(
    tier     INTEGER NOT NULL,
    bucket   INTEGER NOT NULL,  -- the bucket (of the releases: f); BEFORE = INT64_MIN
    proc     INTEGER NOT NULL,
    layer    INTEGER NOT NULL,  -- 0: commits (VirtualAlloc / mmap); 1: heap allocations
    events   INTEGER,           -- activity: the process's events in the bucket (NULL: none)
    delta    INTEGER,           -- activity: net change of outstanding bytes
    relpeak  INTEGER,           -- activity: highest outstanding relative to the bucket start
    peak_off INTEGER,           -- activity: when relpeak was first reached, less bucket (ns)
    bytes    INTEGER NOT NULL,  -- the commit rows' bytes, all stacks
    released INTEGER NOT NULL,  -- the release rows' bytes, all stacks and commit buckets
    data     BLOB NOT NULL,     -- the rows per stack (cells.c)
    PRIMARY KEY (tier DESC, bucket, proc, layer)
) WITHOUT ROWID;

CREATE VIEW commit_cells AS
    SELECT tier, bucket, proc, events, delta, relpeak, bucket + peak_off AS relpeak_ns,
           bytes, released, data
      FROM cells WHERE layer = 0;
CREATE VIEW heap_cells AS
    SELECT tier, bucket, proc, events, delta, relpeak, bucket + peak_off AS relpeak_ns,
           bytes, released, data
      FROM cells WHERE layer = 1;

ALTER TABLE commits RENAME TO v8_commits;
ALTER TABLE releases RENAME TO v8_releases;
ALTER TABLE activity RENAME TO v8_activity;
