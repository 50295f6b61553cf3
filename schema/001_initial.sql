-- 001_initial.sql - the commitwatch storage model (docs/DESIGN.md,
-- "Storage model"). service/core/store.c applies each migration in one
-- transaction and sets PRAGMA user_version itself; application_id,
-- auto_vacuum and WAL are set when the file is created. Do not set them here.

-- Key/value metadata (rules_hash, counters).
CREATE TABLE meta(
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

-- Interned frames, "module!function"; id 0 is never used.
CREATE TABLE frames(
    id   INTEGER PRIMARY KEY,
    text TEXT NOT NULL
);

-- Stacks: frame ids, outermost caller first, little-endian u32 each
-- (stack 0 = the empty stack, an empty blob). tag is derived from the
-- frames by the rule set whose hash is meta.rules_hash.
CREATE TABLE stacks(
    id     INTEGER PRIMARY KEY,
    frames BLOB NOT NULL,
    tag    TEXT NOT NULL
);

-- Process instances (pid + start time); exit_ns is NULL while alive.
CREATE TABLE processes(
    id       INTEGER PRIMARY KEY,
    pid      INTEGER NOT NULL,
    start_ns INTEGER NOT NULL,
    exit_ns  INTEGER,
    name     TEXT NOT NULL,
    cmdline  TEXT
);

-- One row per tier (0 = 1 s, 1 = 1 min, 2 = 1 h):
--   start_ns     first bucket the tier holds (INT64_MIN while empty);
--   horizon_ns   rows before it were folded into the BEFORE baselines,
--                so the tier is exact for windows starting at or after it;
--   end_ns       every bucket before it is complete in this tier (tier 0:
--                end of the last stored bucket; tiers 1, 2: rolled up to);
--   retention_ns effective retention (0 = forever), shortened by the cap.
CREATE TABLE tiers(
    tier         INTEGER PRIMARY KEY,
    width_ns     INTEGER NOT NULL,
    start_ns     INTEGER NOT NULL,
    horizon_ns   INTEGER NOT NULL,
    end_ns       INTEGER NOT NULL,
    retention_ns INTEGER NOT NULL
);
INSERT INTO tiers VALUES
    (0, 1000000000, -9223372036854775808, -9223372036854775808, -9223372036854775808, 0),
    (1, 60000000000, -9223372036854775808, -9223372036854775808, -9223372036854775808, 0),
    (2, 3600000000000, -9223372036854775808, -9223372036854775808, -9223372036854775808, 0);

-- New bytes and commit events per bucket; bucket INT64_MIN (BEFORE) holds
-- rundown commits (in every tier) and the baselines folded by retention.
CREATE TABLE commits(
    tier   INTEGER NOT NULL,
    bucket INTEGER NOT NULL,
    proc   INTEGER NOT NULL,
    stack  INTEGER NOT NULL,
    bytes  INTEGER NOT NULL,
    events INTEGER NOT NULL,
    PRIMARY KEY (tier, bucket, proc, stack)
) WITHOUT ROWID;

-- Pieces released in bucket f whose commit was in bucket a (or BEFORE);
-- closed = commit events whose last byte went with them.
CREATE TABLE releases(
    tier   INTEGER NOT NULL,
    f      INTEGER NOT NULL,
    proc   INTEGER NOT NULL,
    stack  INTEGER NOT NULL,
    a      INTEGER NOT NULL,
    bytes  INTEGER NOT NULL,
    pieces INTEGER NOT NULL,
    closed INTEGER NOT NULL,
    PRIMARY KEY (tier, f, proc, stack, a)
) WITHOUT ROWID;

-- Per process per bucket: events, net change of outstanding bytes, and the
-- highest outstanding relative to the bucket start with when it was first
-- reached.
CREATE TABLE activity(
    tier       INTEGER NOT NULL,
    bucket     INTEGER NOT NULL,
    proc       INTEGER NOT NULL,
    events     INTEGER NOT NULL,
    delta      INTEGER NOT NULL,
    relpeak    INTEGER NOT NULL,
    relpeak_ns INTEGER NOT NULL,
    PRIMARY KEY (tier, bucket, proc)
) WITHOUT ROWID;
