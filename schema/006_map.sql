-- 006_map.sql - snapshots of live process instances' committed-memory
-- maps (issue 14; docs/DESIGN.md, "Memory maps"). Issue 14 reserves 008
-- for it (006 crash, 007 soak): renumber to 008 at the merge.
--
-- The core thread takes a snapshot of an instance's ranges (the tracker's
-- interval map) at the end of a bucket when its pieces changed and
-- either it grew or shrank by 1 MiB or 10 % in at least 10 s, or 10 min
-- passed (map_policy in service.c), and at the end of a run; `ranges` is
-- the encoding of map.h (varints: gap, size, stack id, age), about 8-15
-- bytes a range. Rows older than the raw tier's horizon go with it, so
-- the size cap (which shortens the raw tier first) bounds them too.
CREATE TABLE map_snapshots(
    proc   INTEGER NOT NULL,
    ts_ns  INTEGER NOT NULL,  -- the instant the map shows (a bucket's end)
    nranges INTEGER NOT NULL,
    bytes  INTEGER NOT NULL,  -- committed bytes of the ranges
    ranges BLOB NOT NULL,
    PRIMARY KEY (proc, ts_ns)
) WITHOUT ROWID;
CREATE INDEX map_snapshots_ts ON map_snapshots(ts_ns);
