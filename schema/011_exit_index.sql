-- 011_exit_index.sql - the index of exits also says whether an instance
-- is a group of folded ones (docs/DESIGN.md, "Short-lived processes"), so
-- the keys cache's scan of the instances that exited in a range
-- (store_report_keys.c, keys_exited) reads the index alone, not a row
-- of processes per instance: on a busy machine it reads every exit since
-- the data's start when a handle fills its first entry. The engine's
-- query of the processes that exited since an instant (004_alerts) uses
-- it as before.
DROP INDEX processes_exit;
CREATE INDEX processes_exit ON processes(exit_ns, folded) WHERE exit_ns IS NOT NULL;
