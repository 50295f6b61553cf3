-- 012_minute_sums.sql - the sums a ranked list reads of the minute tier's
-- commit cells, one row a minute for every process (issue 34;
-- docs/DESIGN.md, "Minute sums").
--
-- A ranked list's keys are per process sums of the cells' columns bytes,
-- released and events (store_report_keys.c); for a stretch of minutes it
-- read a row of cells a process a minute, and SQLite's cost a row (about
-- 0.25 us) made 26 minutes of 10,000 live processes 70 ms. A row here
-- holds one minute's columns of every commit-layer cell of tier 1, so
-- such a stretch reads a row a minute and decodes the rest in C.
--
-- bucket is the minute (ns, the cells' bucket), procs the cells it sums,
-- data per cell in process order as varints: the process less the
-- previous one's (the first's: less 0), then the zigzag of bytes,
-- released and events (NULL: 0). The writer stores it, read back from the
-- minute's cells, in the transaction that stores them, and deletes it
-- with them (retention). It is derived data: a minute without a row (one
-- stored before this migration, or rows deleted by hand) is read from its
-- cells, so deleting rows of this table changes no figure.
CREATE TABLE minute_sums(
    bucket INTEGER PRIMARY KEY,  -- the minute, as the cells' bucket
    procs  INTEGER NOT NULL,     -- the cells it sums
    data   BLOB NOT NULL
);
