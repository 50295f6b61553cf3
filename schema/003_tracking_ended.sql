-- 003_tracking_ended.sql - telling a real exit from the end of tracking.
--
-- When a run ends (end of a replay's or .etl's input, service stop), the
-- instances still alive are ended where tracking ended: their memory
-- leaves the figures there (release rows at that time, so a later run's
-- rundown, which starts new instances, never counts it twice), but they
-- did not exit. Such a row has exit_ns NULL and tracking_ended_ns set;
-- exit_ns is only ever a real exit. See docs/DESIGN.md, "End of a run".
ALTER TABLE processes ADD COLUMN tracking_ended_ns INTEGER;

-- Databases written before this migration stored the end of tracking as
-- an exit. The last run's can be told apart exactly: a run ends its live
-- instances at the start of the bucket after its last event or tick, and
-- stores that bucket last, so no event (no real exit) can fall on that
-- instant. Exits of earlier runs that a restart followed stay as they
-- were (their figures are the same either way; only the label differs).
UPDATE processes SET tracking_ended_ns = exit_ns, exit_ns = NULL
 WHERE exit_ns IS NOT NULL
   AND exit_ns = (SELECT end_ns - width_ns FROM tiers
                   WHERE tier = 0 AND end_ns > -9223372036854775808);

-- The end of the data is the newest tracking end when nothing was stored
-- after it (store_query.c, cw_store_data_end).
CREATE INDEX processes_ended ON processes(tracking_ended_ns)
 WHERE tracking_ended_ns IS NOT NULL;
