#!/usr/bin/env python3
"""The stall watchdog in plain library use under mpirun, then `braid trace analyze` on its dumps.

3 ranks run stall_probe.cc with the default 30-minute op timeout and BRAID_STALL_WARN_S=2. Rank 1 holds
back from an allreduce until ranks 0 and 2 have dumped their flight recorders, which only their stall
watchdogs do. Checks:
  * the job ends cleanly (so the dumps appeared: rank 1 exits 1 when they did not within 65 s);
  * ranks 0 and 2 each warned "stall: allreduce #N ... ranks that never joined it: 1";
  * `braid trace analyze DIR` exits 1 (a hang) and names op #N allreduce and rank 1 as never entering it.

Usage: stall_watchdog_test.py MPIEXEC PROBE BRAID BACKEND
"""
import os
import re
import subprocess
import sys
import tempfile


def fail(msg, out=""):
    print(f"FAIL: {msg}")
    if out:
        print("---- output ----")
        print(out)
    sys.exit(1)


def main():
    mpiexec, probe, braid, backend = sys.argv[1:5]
    with tempfile.TemporaryDirectory(prefix="braid-stall-") as d:
        env = dict(os.environ)
        env.update({"BRAID_TRACE_DIR": d, "BRAID_STALL_WARN_S": "2",
                    "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
        env.pop("MASTER_ADDR", None)
        job = subprocess.run([mpiexec, "-np", "3", "--oversubscribe", probe, backend], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
        out = job.stdout
        if job.returncode != 0:
            fail(f"the job exited {job.returncode}", out)
        warns = re.findall(r"stall: allreduce #(\d+) on group 'world' \(rank (\d)/3, \w+\).*?"
                           r"ranks that never joined it: ([^;\n]*)", out)
        by_rank = {int(r): (int(seq), missing) for seq, r, missing in warns}
        if sorted(by_rank) != [0, 2]:
            fail(f"expected stall warnings from ranks 0 and 2, got {sorted(by_rank)}", out)
        seqs = {seq for seq, _ in by_rank.values()}
        if len(seqs) != 1:
            fail(f"the warnings name different ops: {by_rank}", out)
        seq = seqs.pop()
        for r, (_, missing) in by_rank.items():
            if not re.match(r"1($|\s|\()", missing.strip()):
                fail(f"rank {r}'s warning names '{missing}' as missing, not rank 1", out)
        print(f"ok: ranks 0 and 2 warned that rank 1 never joined allreduce #{seq}")

        an = subprocess.run([braid, "trace", "analyze", d], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=60)
        if an.returncode != 1:
            fail(f"braid trace analyze exited {an.returncode}, expected 1 (a hang)", an.stdout)
        if f"HANG in #{seq} allreduce" not in an.stdout:
            fail(f"the analysis does not name #{seq} allreduce", an.stdout)
        never = [l for l in an.stdout.splitlines() if "NEVER ENTERED" in l]
        if len(never) != 1 or not re.search(r"\brank 1 \(no dump", never[0]):
            fail("the analysis does not name rank 1 as never entering the op", an.stdout)
        if re.search(r"\brank [02]\b", never[0]):
            fail("the analysis names rank 0 or 2 as never entering the op", an.stdout)
        print(an.stdout)
        print("ok: braid trace analyze names the op and rank 1")


if __name__ == "__main__":
    main()
