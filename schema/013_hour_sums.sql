-- 013_hour_sums.sql - the sums a ranked list reads of the hour tier's
-- commit cells, one row an hour for every process (issue 34; docs/DESIGN.md,
-- "Bucket sums").
--
-- A handle's first ranked list sums every hour cell before its window
-- (store_report_keys.c): 10,000 live processes hold 10,000 cells an hour,
-- about 2.8 ms an hour of history at SQLite's cost a row. A row here holds
-- one hour's columns bytes, released and events of every commit-layer
-- cell, as a row of minute_sums does a minute's (012_bucket_sums.sql: the
-- same encoding), so an hour reads one row. The writer stores a row in the
-- transaction that stores its hour's cells and retention deletes it with
-- them. Derived data: an hour without a row is read from its cells. The
-- hours a database already holds get theirs from the writer, downwards
-- from the hour tier's end noted here (store_tiers.c), which deletes the
-- note when it has written them all.
CREATE TABLE hour_sums(
    bucket INTEGER PRIMARY KEY,  -- the hour, as the cells' bucket
    procs  INTEGER NOT NULL,     -- the cells it sums
    data   BLOB NOT NULL
);
INSERT INTO meta(key, value)
    SELECT 'hour_sums_below', end_ns FROM tiers WHERE tier = 2 AND end_ns > start_ns;
