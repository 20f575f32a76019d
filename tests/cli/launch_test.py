#!/usr/bin/env python3
"""End-to-end tests of `braid launch`: each rank's environment, output prefixed by rank in whole lines,
a failing rank stopping the others (exit code, message, nothing left running), a rank killed by a signal,
signals forwarded to every rank, SIGKILL after --kill-timeout, the ranks dying with the launcher, and usage
errors. Usage: launch_test.py PATH_TO_BRAID"""
import os
import re
import select
import signal
import subprocess
import sys
import time
import uuid

LAUNCHER_VARS = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "RANK",
                 "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "BRAID_LOG_LEVEL",
                 "BRAID_LOG")
# Every rank started here carries this token in its environment, so that processes left behind can be
# found by reading /proc/*/environ, whatever their name.
TOKEN = f"BRAID_LAUNCH_TEST_TOKEN={uuid.uuid4().hex}"


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env[TOKEN.split("=")[0]] = TOKEN.split("=")[1]
    env.update(extra or {})
    return env


def run(braid, args, timeout=30, env_extra=None):
    start = time.monotonic()
    r = subprocess.run([braid] + args, env=clean_env(env_extra), capture_output=True, text=True, timeout=timeout)
    r.seconds = time.monotonic() - start
    return r


def leftovers():
    """PIDs of live processes that carry this run's token."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if TOKEN.encode() in environ and state != "Z" and int(pid) != os.getpid():
            found.append(int(pid))
    return found


def no_leftovers(within=3.0):
    deadline = time.monotonic() + within
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not leftovers()


class Started:
    """A launcher running in the background, whose output is read with a deadline."""

    def __init__(self, braid, args):
        self.proc = subprocess.Popen([braid] + args, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out = b""
        self.err = b""

    def read_until(self, pattern, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.out.decode(errors="replace"), re.S):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([self.proc.stdout, self.proc.stderr], [], [], left)
            for f in ready:
                chunk = os.read(f.fileno(), 65536)
                if f is self.proc.stdout:
                    self.out += chunk
                else:
                    self.err += chunk
        return True

    def finish(self, timeout=15.0):
        """The launcher's exit code, or None when it is still running after `timeout` (it is then killed)."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            self.err += b"\n(launch_test: still running after the timeout; killed)\n"
        self.out += out
        self.err += err
        return None if self.proc.returncode == -signal.SIGKILL else self.proc.returncode

    def report(self):
        return (f"rc={self.proc.returncode}\n--- stdout\n{self.out.decode(errors='replace')}\n--- stderr\n"
                f"{self.err.decode(errors='replace')}")


def main():
    braid = sys.argv[1]
    failures = []

    def expect(name, cond, result):
        if isinstance(result, Started):
            detail = result.report()
        else:
            detail = f"rc={result.returncode} ({getattr(result, 'seconds', 0):.1f} s)\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        print(f"{'ok  ' if cond else 'FAIL'} {name}")
        if not cond:
            failures.append(f"{name}: {detail}")

    # braid info under the launcher: each rank sees the env launcher and its own rank; every line prefixed.
    r = run(braid, ["launch", "-n", "2", "--", "braid", "info"])
    lines = r.stdout.splitlines()
    expect("launch -n 2 -- braid info", r.returncode == 0 and lines
           and all(re.match(r"\[rank [01]\] ", l) for l in lines)
           and "[rank 0]   process     rank 0 of 2 (launched by env)" in lines
           and "[rank 1]   process     rank 1 of 2 (launched by env)" in lines, r)

    # The environment of each rank, on stdout; stderr stays on stderr. An outer launcher's rank is removed.
    script = 'echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT"; echo "err $RANK" >&2'
    r = run(braid, ["launch", "-n", "3", "--", "sh", "-c", script], env_extra={"SLURM_PROCID": "0", "SLURM_NTASKS": "1"})
    got = sorted(r.stdout.splitlines())
    port = got[0].split()[-1] if got else ""
    expect("each rank's RANK, WORLD_SIZE, LOCAL_*, MASTER_*", r.returncode == 0 and port.isdigit() and int(port) > 0
           and got == [f"[rank {i}] {i} 3 {i} 3 127.0.0.1 {port}" for i in range(3)]
           and sorted(r.stderr.splitlines()) == [f"[rank {i}] err {i}" for i in range(3)], r)
    r = run(braid, ["launch", "-n", "2", "--master-addr", "localhost", "--master-port", "29555", "--",
                    "sh", "-c", 'echo "$MASTER_ADDR:$MASTER_PORT"'])
    expect("--master-addr and --master-port", r.returncode == 0
           and sorted(r.stdout.splitlines()) == ["[rank 0] localhost:29555", "[rank 1] localhost:29555"], r)
    r = run(braid, ["launch", "-n", "2", "--no-prefix", "--", "sh", "-c", "echo plain"])
    expect("--no-prefix", r.returncode == 0 and r.stdout == "plain\nplain\n", r)

    # Partial lines: rank 0 writes a line in three pieces while rank 1 writes whole lines in between; the
    # last piece has no newline at all.
    script = ('if [ $RANK = 0 ]; then printf "aa"; sleep 0.3; printf "bb"; sleep 0.3; printf "cc\\ntail"; '
              'else sleep 0.1; for i in 1 2 3 4 5; do echo "line $i"; sleep 0.1; done; fi')
    r = run(braid, ["launch", "-n", "2", "--", "sh", "-c", script])
    lines = r.stdout.splitlines()
    expect("partial lines are held until complete and never mixed", r.returncode == 0
           and "[rank 0] aabbcc" in lines and lines[-1] in ("[rank 0] tail", "[rank 1] line 5")
           and "[rank 0] tail" in lines and r.stdout.endswith("\n")
           and [l for l in lines if l.startswith("[rank 1]")] == [f"[rank 1] line {i}" for i in range(1, 6)]
           and len(lines) == 7, r)

    # A failing rank stops the others at once; the launcher exits with its code; nothing is left.
    r = run(braid, ["launch", "-n", "3", "--", "sh", "-c", "if [ $RANK = 1 ]; then exit 3; fi; sleep 30"])
    expect("a failing rank stops the others", r.returncode == 3 and r.seconds < 8
           and "braid launch: rank 1 exited with code 3; stopping the other 2 ranks" in r.stderr, r)
    expect("nothing left after a failed rank", no_leftovers(), r)

    # A rank killed by a signal: 128 + 9. The other rank ignores SIGTERM and is killed after --kill-timeout.
    r = run(braid, ["launch", "-n", "2", "--kill-timeout", "1", "--",
                    "sh", "-c", "trap '' TERM; if [ $RANK = 0 ]; then sleep 0.5; kill -KILL $$; fi; sleep 30"])
    expect("a rank killed by SIGKILL; SIGKILL after --kill-timeout", r.returncode == 137 and 1.4 < r.seconds < 6
           and "braid launch: rank 0 killed by SIGKILL; stopping the other 1 rank" in r.stderr
           and "rank 1 still running 1 s after SIGTERM; sending SIGKILL" in r.stderr, r)
    expect("nothing left after SIGKILL", no_leftovers(), r)

    # Signals reach every rank: SIGUSR1 (the job goes on), then SIGTERM (each rank exits 0 in its trap).
    script = ('trap "echo usr1 $RANK" USR1; trap "echo term $RANK; exit 0" TERM; echo ready $RANK; '
              'while true; do sleep 0.1; done')
    s = Started(braid, ["launch", "-n", "2", "--", "sh", "-c", script])
    ok = s.read_until(r"ready 0.*ready 1|ready 1.*ready 0")
    s.proc.send_signal(signal.SIGUSR1)
    ok = ok and s.read_until(r"usr1 0.*usr1 1|usr1 1.*usr1 0")
    s.proc.send_signal(signal.SIGTERM)
    rc = s.finish()
    out = s.out.decode()
    expect("SIGUSR1 and SIGTERM are forwarded to every rank", ok and rc == 0
           and "[rank 0] term 0" in out and "[rank 1] term 1" in out
           and "got SIGUSR1; forwarding it to 2 ranks" in s.err.decode()
           and "got SIGTERM; forwarding it to 2 ranks" in s.err.decode(), s)
    expect("nothing left after SIGTERM", no_leftovers(), s)

    # SIGINT like a terminal's Ctrl-C: ranks without a trap die of it, and the launcher exits 128 + 2. (The
    # rank execs sleep: a shell that is forking a command when SIGINT arrives may ignore it.)
    s = Started(braid, ["launch", "-n", "2", "--", "sh", "-c", "echo ready $RANK; exec sleep 30"])
    ok = s.read_until(r"ready 0.*ready 1|ready 1.*ready 0")
    s.proc.send_signal(signal.SIGINT)
    rc = s.finish()
    expect("SIGINT ends ranks without a trap: exit 130", ok and rc == 130
           and re.search(r"rank [01] killed by SIGINT", s.err.decode()), s)

    # The launcher itself dies (SIGKILL, nothing forwarded): its ranks die with it (PR_SET_PDEATHSIG).
    s = Started(braid, ["launch", "-n", "2", "--", "sh", "-c", "echo ready $RANK; exec sleep 30"])
    ok = s.read_until(r"ready 0.*ready 1|ready 1.*ready 0")
    s.proc.kill()
    s.finish()
    expect("the ranks die with the launcher", ok and s.proc.returncode == -signal.SIGKILL and no_leftovers(), s)

    # Usage errors exit 2 and start nothing.
    r = run(braid, ["launch", "--", "true"])
    expect("launch without -n exits 2", r.returncode == 2 and "--nprocs" in r.stderr, r)
    r = run(braid, ["launch", "-n", "2"])
    expect("launch without a command exits 2", r.returncode == 2 and "command" in r.stderr, r)
    r = run(braid, ["launch", "-n", "2", "--", "no-such-command-xyz"])
    expect("an unknown command exits 2 naming it", r.returncode == 2
           and "command 'no-such-command-xyz' not found in PATH" in r.stderr, r)
    r = run(braid, ["launch", "--help"])
    expect("launch --help explains it", r.returncode == 0 and all(
        s in r.stdout for s in ("--kill-timeout", "--master-port", "braid launch -n 2 -- braid info", "MASTER_ADDR",
                                "[rank R]")), r)

    for f in failures:
        print(f"FAILED {f}\n")
    print(f"launch_test: {'OK' if not failures else f'{len(failures)} failure(s)'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
