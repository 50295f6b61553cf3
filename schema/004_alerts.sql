-- 004_alerts.sql - alert state, transitions, silences and notification
-- attempts (docs/ALERTS.md). Written by the alert engine's thread and the
-- notifier through their own handles (WAL; short transactions), and by
-- the HTTP API for silences; read by the API and /metrics.

-- One row per series ever evaluated non-inactive: rule x (instance | name
-- | machine) x tag. key is "instance:ID|TAG", "name:NAME|TAG" or
-- "machine|TAG" (TAG "*" when the rule sums its tags).
CREATE TABLE alert_series(
    id             INTEGER PRIMARY KEY,
    rule           TEXT NOT NULL,
    rule_hash      TEXT NOT NULL,   -- of the rule's text when the state was kept
    key            TEXT NOT NULL,
    process        TEXT,            -- NULL for the machine
    proc           INTEGER,         -- instance id when grouped by instance
    pid            INTEGER,
    tag            TEXT,            -- NULL when the tags are summed
    state          INTEGER NOT NULL, -- 0 inactive, 1 pending, 2 firing
    severity       INTEGER NOT NULL, -- 0 none, 1 warning, 2 critical
    active_since   INTEGER,         -- condition true since (pending / firing), ns
    firing_since   INTEGER,         -- started firing, ns
    false_since    INTEGER,         -- firing, condition false since (keep_firing_for), ns
    last_sent_ns   INTEGER,         -- last notification (repeat interval)
    value          REAL,
    threshold      REAL,
    leak_score     REAL,
    ttl_s          REAL,
    detail         TEXT,            -- JSON: leak-score components, forecast, labels
    updated_ns     INTEGER NOT NULL, -- evaluation instant of this row
    UNIQUE(rule, key)
);
CREATE INDEX alert_series_state ON alert_series(state) WHERE state != 0;

-- Every transition of every series, in evaluation order.
CREATE TABLE alert_transitions(
    id         INTEGER PRIMARY KEY,
    series     INTEGER NOT NULL REFERENCES alert_series(id),
    ts_ns      INTEGER NOT NULL,
    from_state INTEGER NOT NULL,
    to_state   INTEGER NOT NULL,
    severity   INTEGER NOT NULL,
    value      REAL,
    threshold  REAL,
    leak_score REAL,
    ttl_s      REAL,
    reason     TEXT NOT NULL,
    silenced   INTEGER NOT NULL DEFAULT 0, -- a silence matched: not notified
    detail     TEXT
);
CREATE INDEX alert_transitions_series ON alert_transitions(series, ts_ns);
CREATE INDEX alert_transitions_ts ON alert_transitions(ts_ns);

-- Silences: matchers is a JSON array of {"name","value","isRegex","isEqual"}
-- (Alertmanager's shape) over the alert's labels; active in [starts, ends).
CREATE TABLE silences(
    id         INTEGER PRIMARY KEY,
    matchers   TEXT NOT NULL,
    starts_ns  INTEGER NOT NULL,
    ends_ns    INTEGER NOT NULL,
    created_by TEXT NOT NULL,
    comment    TEXT NOT NULL,
    created_ns INTEGER NOT NULL,
    deleted_ns INTEGER            -- expired early by DELETE
);

-- Every delivery attempt: channel is alertmanager, webhook, journald,
-- syslog, eventlog or exec; result ok, error, dropped (rate limit).
CREATE TABLE notifications(
    id         INTEGER PRIMARY KEY,
    ts_ns      INTEGER NOT NULL,     -- wall clock of the attempt
    channel    TEXT NOT NULL,
    series     INTEGER,
    transition INTEGER,
    attempt    INTEGER NOT NULL,
    result     TEXT NOT NULL,
    detail     TEXT
);
CREATE INDEX notifications_ts ON notifications(ts_ns);

-- Processes that exited since an instant (the engine resolves their series).
CREATE INDEX processes_exit ON processes(exit_ns) WHERE exit_ns IS NOT NULL;
