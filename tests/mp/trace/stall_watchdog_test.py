#!/usr/bin/env python3
"""The stall watchdog in plain library use under mpirun, then `braid trace analyze` on its dumps.

3 ranks run stall_probe.cc with the default 30-minute op timeout and BRAID_STALL_WARN_S=2. Rank 1 holds
back from an allreduce until ranks 0 and 2 have dumped their flight recorders, which only their stall
watchdogs do. With MODE `stop`, rank 1 stops itself (SIGSTOP) instead, and this script continues it
(SIGCONT) once both dumps are there, which must happen within 70 s of the stop. Checks:
  * the job ends cleanly (so the dumps appeared: rank 1 exits 1 when they did not within 65 s);
  * ranks 0 and 2 each warned "stall: allreduce #N ... ranks that never joined it: 1";
  * `braid trace analyze DIR` exits 1 (a hang) and names op #N allreduce and rank 1 as never entering it.

Usage: stall_watchdog_test.py MPIEXEC PROBE BRAID BACKEND [hold|stop]
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

NAMED_WITHIN_S = 70  # the bound on naming a stalled rank in plain library use


def fail(msg, out=""):
    print(f"FAIL: {msg}")
    if out:
        print("---- output ----")
        print(out)
    sys.exit(1)


def continue_stopped_rank(d, job):
    """Waits for rank 1's pid file, then for ranks 0 and 2's dumps (within NAMED_WITHIN_S of the stop),
    and continues rank 1 whatever happened, so that the job can end."""
    pid_file = os.path.join(d, "stopped-pid")
    start = time.monotonic()
    while not os.path.exists(pid_file) and job.poll() is None and time.monotonic() - start < 120:
        time.sleep(0.05)
    if not os.path.exists(pid_file):
        fail("rank 1 never wrote its pid (did it reach the stop?)")
    time.sleep(0.1)  # the pid file is written just before the stop
    with open(pid_file) as f:
        pid = int(f.read().strip())
    stopped_at = time.monotonic()
    dumps = [os.path.join(d, f"rank-{r}.json") for r in (0, 2)]
    while not all(os.path.exists(p) for p in dumps) and time.monotonic() - stopped_at < NAMED_WITHIN_S:
        time.sleep(0.1)
    took = time.monotonic() - stopped_at
    present = all(os.path.exists(p) for p in dumps)
    os.kill(pid, signal.SIGCONT)
    if not present:
        fail(f"ranks 0 and 2 did not dump their flight recorders within {NAMED_WITHIN_S} s of rank 1's stop")
    print(f"ok: ranks 0 and 2 dumped {took:.1f} s after rank 1 stopped; rank 1 continued")


def main():
    mpiexec, probe, braid, backend = sys.argv[1:5]
    mode = sys.argv[5] if len(sys.argv) > 5 else "hold"
    with tempfile.TemporaryDirectory(prefix="braid-stall-") as d:
        env = dict(os.environ)
        env.update({"BRAID_TRACE_DIR": d, "BRAID_STALL_WARN_S": "2",
                    "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
        env.pop("MASTER_ADDR", None)
        with tempfile.TemporaryFile(mode="w+") as log:
            job = subprocess.Popen([mpiexec, "-np", "3", "--oversubscribe", probe, backend, mode], env=env,
                                   stdout=log, stderr=subprocess.STDOUT, text=True)
            try:
                if mode == "stop":
                    continue_stopped_rank(d, job)
                job.wait(timeout=240)
            finally:
                if job.poll() is None:
                    job.kill()
                    job.wait()
            log.seek(0)
            out = log.read()
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
