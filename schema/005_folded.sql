-- 005_folded.sql - short-lived process instances stored folded
-- (docs/DESIGN.md, "Short-lived processes"). Issue 12 reserves number
-- 007 for it; it becomes 007 when the store's 005 and 006 land.
--
-- An instance that exits less than fold_lifetime after its start, having
-- committed less than fold_size, is stored folded: its commits, releases
-- and activity rows carry the id of a group row of processes (pid 0, one
-- per name per hour of starts, start = its first member's start, exit =
-- its last member's exit), so machine totals and per-name figures stay
-- exact while the reports list the group as one line. `folded` counts the
-- instances in a group row; it is NULL for an instance.
ALTER TABLE processes ADD COLUMN folded INTEGER;

-- One row per folded instance, for listing a group's instances on demand.
-- Only what tells them apart: no cmdline, no index on pid (a group is
-- found by id, its instances by start time).
CREATE TABLE folded(
    grp      INTEGER NOT NULL,
    start_ns INTEGER NOT NULL,
    pid      INTEGER NOT NULL,
    exit_ns  INTEGER NOT NULL,
    bytes    INTEGER NOT NULL, -- bytes it committed in its life
    PRIMARY KEY (grp, start_ns, pid)
) WITHOUT ROWID;
