-- 012_bucket_sums.sql - the sums a ranked list reads of the raw and
-- minute tiers' commit cells, one row a bucket for every process (issue
-- 34; docs/DESIGN.md, "Bucket sums").
--
-- A ranked list's keys are per process sums of the cells' columns bytes,
-- released and events (store_report_keys.c); for a stretch of seconds or
-- minutes they read a row of cells a process a bucket, and SQLite's cost
-- a row (about 0.25 us) made the 26 minutes before t0 of 10,000 live
-- processes 70 ms. A row here holds one bucket's columns of every
-- commit-layer cell, so such a stretch reads a row a bucket and decodes
-- the rest in C.
--
-- bucket is the second or minute (ns, the cells' bucket), procs the cells
-- it sums, data varints: flags (1: the byte figures are in 4 KiB pages,
-- as when every one is a whole page), then per cell in process order the
-- process less the previous one's (the first's: less 0) and the zigzag
-- of bytes, released and events (NULL: 0). The writer stores a row in
-- the transaction that stores its bucket's cells, deletes a minute's with
-- them (retention) and keeps a second's for the last 65 minutes of the
-- raw tier. They are derived data: a bucket without a row is read from its
-- cells, so deleting rows of these tables changes no figure. The minutes
-- a database already holds get theirs from the writer, downwards from
-- the minute tier's end noted here (store_tiers.c), which deletes the
-- note when it has written them all.
CREATE TABLE second_sums(
    bucket INTEGER PRIMARY KEY,  -- the second, as the cells' bucket
    procs  INTEGER NOT NULL,     -- the cells it sums
    data   BLOB NOT NULL
);
CREATE TABLE minute_sums(
    bucket INTEGER PRIMARY KEY,  -- the minute, as the cells' bucket
    procs  INTEGER NOT NULL,
    data   BLOB NOT NULL
);
INSERT INTO meta(key, value)
    SELECT 'minute_sums_below', end_ns FROM tiers WHERE tier = 1 AND end_ns > start_ns;
