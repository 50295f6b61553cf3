"""test_crash_kill.py - issue 13 item 2, bounded for CI: `commitwatch run`
killed with SIGKILL at random moments (CW_CRASH_KILLS, default 100) during
start-up, ingestion, rollups and retention, restarted on the next segment
of a synthetic trace each time, with a power cut (the database and WAL
copied mid-write, the WAL cut after its checkpointed frames) every fifth
run. After each kill: PRAGMA integrity_check is ok, the trace time lost
is reported (the open bucket and what was queued for the writer), and
the stored windows equal the reference model (refmodel.py) up
to the last stored bucket; at the end the whole database does. The logic
is tests/e2e/crashkill.py; bench/crash_kill.py runs it longer.

Environment: CW_BIN (tests/CMakeLists.txt), CW_CRASH_KILLS, CW_CRASH_SEED.
"""

import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crashkill  # noqa: E402

BIN = os.environ.get("CW_BIN", "commitwatch")


def main():
    tmp = tempfile.mkdtemp(prefix="cw_e2e_crash_")
    kills = int(os.environ.get("CW_CRASH_KILLS", "100"))
    seed = int(os.environ.get("CW_CRASH_SEED", "1"))
    try:
        c = crashkill.Campaign(BIN, tmp, kills, seed=seed, max_delay=1.5,
                               log=lambda m: print(m, flush=True))
        st = c.run()
    except crashkill.Failure as e:
        print(f"FAIL: {e} (database kept in {tmp})", flush=True)
        return 1
    print(crashkill.summary(st), flush=True)
    ok = (st["kills"] == kills and st["integrity"] == kills and st["powercuts"] > 0
          and st["rollup_runs"] > 0 and st["retention_runs"] > 0 and st["windows"] > kills)
    print("PASS" if ok else "FAIL: the campaign did not cover kills, rollups, retention and "
          "power cuts", flush=True)
    shutil.rmtree(tmp)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
