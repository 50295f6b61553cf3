-- 008_heap.sql - the heap drill-down's traces (docs/DESIGN.md, "Heap
-- drill-down"): one row per trace asked for (by the API, by an alert
-- rule's heap_trace, or by `commitwatch heap --db`), written by the
-- service's heap-trace threads through their own handle; and the heap
-- layer's figures per stack of each finished trace. Heap figures live
-- only in these tables: commit figures never mix with them.

CREATE TABLE heap_traces(
    id             INTEGER PRIMARY KEY,
    pid            INTEGER NOT NULL,
    proc           INTEGER,          -- process instance id (processes.id), if known
    process        TEXT,             -- the process's name when asked
    trigger        TEXT NOT NULL,    -- 'api', 'alert' or 'cli'
    alert_series   INTEGER,          -- alert_series.id for trigger 'alert'
    rule           TEXT,             -- the alert rule that asked for it
    requested_ns   INTEGER NOT NULL,
    duration_ns    INTEGER NOT NULL, -- asked for; 0: until the process exits
    started_ns     INTEGER,          -- when tracing began (NULL: it never did)
    ended_ns       INTEGER,
    -- 'running', 'done' (duration reached or process exited), 'stopped'
    -- (asked to stop, or the service stopped), 'failed' (error says why)
    state          TEXT NOT NULL,
    end_reason     TEXT,             -- 'duration', 'exited', 'stopped', 'shutdown'
    error          TEXT,
    events         INTEGER NOT NULL DEFAULT 0,
    unknown_frees  INTEGER NOT NULL DEFAULT 0, -- frees of blocks allocated before the attach
    zero_allocs    INTEGER NOT NULL DEFAULT 0,
    reused         INTEGER NOT NULL DEFAULT 0,
    dropped        INTEGER NOT NULL DEFAULT 0, -- events the ring had no room for
    torn           INTEGER NOT NULL DEFAULT 0,
    outstanding_bytes INTEGER NOT NULL DEFAULT 0,
    outstanding_count INTEGER NOT NULL DEFAULT 0,
    alloc_bytes    INTEGER NOT NULL DEFAULT 0,
    alloc_count    INTEGER NOT NULL DEFAULT 0,
    freed_bytes    INTEGER NOT NULL DEFAULT 0,
    freed_count    INTEGER NOT NULL DEFAULT 0,
    peak_bytes     INTEGER NOT NULL DEFAULT 0,
    report         TEXT              -- the whole report, JSON (heap.h, cw_heap_report_json)
);
CREATE INDEX heap_traces_series ON heap_traces(alert_series) WHERE alert_series IS NOT NULL;
CREATE INDEX heap_traces_pid ON heap_traces(pid);

-- The figures per stack of a finished trace, largest outstanding first
-- (rank 0). frames: the stack's frames joined by ';', outermost first
-- (the folded format), so `sqlite3` shows them readably.
CREATE TABLE heap_stacks(
    trace          INTEGER NOT NULL REFERENCES heap_traces(id),
    rank           INTEGER NOT NULL,
    layer          TEXT NOT NULL DEFAULT 'heap',
    frames         TEXT NOT NULL,
    outstanding_bytes INTEGER NOT NULL,
    outstanding_count INTEGER NOT NULL,
    alloc_bytes    INTEGER NOT NULL,
    alloc_count    INTEGER NOT NULL,
    freed_bytes    INTEGER NOT NULL,
    freed_count    INTEGER NOT NULL,
    peak_bytes     INTEGER NOT NULL,
    PRIMARY KEY(trace, rank)
) WITHOUT ROWID;
