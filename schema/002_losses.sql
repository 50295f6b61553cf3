-- 002_losses.sql - source health records, and finding instances by pid.
--
-- losses: one row whenever a batch carries source counters that differ
-- from the last row (cumulative since the service started, so a restart
-- shows as counters going back to 0). Lost events (perf ring overruns,
-- ETW buffers lost) and drift (tracked outstanding minus the OS's own
-- figure, e.g. the smaps oracle on Linux) say how far the figures of the
-- surrounding buckets can be trusted; the API and /metrics read them.
CREATE TABLE losses(
    ts_ns        INTEGER NOT NULL, -- end of the bucket that carried them
    events_total INTEGER NOT NULL,
    lost_events  INTEGER NOT NULL,
    drift_bytes  INTEGER NOT NULL,
    detail       TEXT
);
CREATE INDEX losses_ts ON losses(ts_ns);

-- The API looks processes up by pid ("/api/processes?pid="); without this
-- every such lookup scans all instances ever seen.
CREATE INDEX processes_pid ON processes(pid, start_ns);
