-- 007_corrections.sql - corrections of an instance's figures from the OS's
-- own (docs/LINUX.md, "Losses and drift"; issue 32).
--
-- When a live source lost events (perf ring overruns, ETW buffers lost),
-- it reads the processes again from the kernel (smaps on Linux) and
-- commits or decommits the difference. The lost events name no process;
-- the correction does: each instance counts the corrections that changed
-- its figures, the bytes they committed and decommitted, and when the
-- last one was. The API and the dashboard mark such an instance as
-- corrected.
ALTER TABLE processes ADD COLUMN corrections INTEGER NOT NULL DEFAULT 0;
ALTER TABLE processes ADD COLUMN corrected_committed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE processes ADD COLUMN corrected_decommitted INTEGER NOT NULL DEFAULT 0;
ALTER TABLE processes ADD COLUMN last_correction_ns INTEGER;
