#!/usr/bin/env python3
"""Starts N copies of a command as an env:// job (torchrun-style variables), without MPI.

    launch_env.py N [--timeout S] -- cmd [args...]

Each process gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free
MASTER_PORT (rank 0 hosts the TCPStore there). Every output line is prefixed with "[rank r] ". The launcher
exits 0 when every rank exits 0. When a rank fails, the others are killed at once (they would otherwise
wait for it until their own timeouts) and the launcher exits non-zero naming the rank; when the overall
timeout passes, everyone is killed and the launcher names the ranks still running.

Launcher variables of Open MPI, PMIx and Slurm are removed from the children's environment: braid's launch
detection prefers them over RANK/WORLD_SIZE, and a launcher started inside an mpirun or srun job must still
produce an env:// job.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

# Prefixes of variables that would make a child believe it runs under another launcher.
_FOREIGN_LAUNCHER_PREFIXES = ("OMPI_", "PMIX_", "PMI_", "SLURM_")
# Time between SIGTERM and SIGKILL when stopping ranks.
_KILL_GRACE_S = 3.0


def free_port():
    """A TCP port that is free on the loopback interface right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(rank, size, port):
    env = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN_LAUNCHER_PREFIXES)}
    env.update({
        "RANK": str(rank),
        "WORLD_SIZE": str(size),
        "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(size),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    })
    return env


class Job:
    def __init__(self, size, cmd, out):
        self.size = size
        self.out = out
        self.out_lock = threading.Lock()
        port = free_port()
        self.procs = []
        self.readers = []
        for rank in range(size):
            # Own session: stopping a rank also stops anything it started.
            try:
                p = subprocess.Popen(cmd, env=child_env(rank, size, port), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as e:
                self.kill_all()
                raise SystemExit(f"launch_env: cannot start rank {rank}: {cmd[0]}: {e.strerror}") from e
            self.procs.append(p)
            # Daemon: a reader blocked on a pipe that some orphan keeps open must not keep the launcher alive.
            t = threading.Thread(target=self._pump, args=(rank, p.stdout), daemon=True)
            t.start()
            self.readers.append(t)

    def _pump(self, rank, stream):
        prefix = f"[rank {rank}] ".encode()
        for line in iter(stream.readline, b""):
            if not line.endswith(b"\n"):
                line += b"\n"
            with self.out_lock:
                self.out.write(prefix + line)
                self.out.flush()
        stream.close()

    def say(self, text):
        with self.out_lock:
            self.out.write(f"launch_env: {text}\n".encode())
            self.out.flush()

    def running(self):
        return [r for r, p in enumerate(self.procs) if p.poll() is None]

    def kill_all(self):
        """SIGTERM every running rank's session, then SIGKILL what is left after a grace period."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            alive = self.running()
            if not alive:
                break
            for r in alive:
                try:
                    os.killpg(self.procs[r].pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + _KILL_GRACE_S
            while self.running() and time.monotonic() < deadline:
                time.sleep(0.05)
        for p in self.procs:
            p.wait()

    def join_readers(self):
        for t in self.readers:
            t.join(timeout=10)

    def run(self, timeout_s):
        """Waits for the ranks; returns the launcher's exit code."""
        deadline = time.monotonic() + timeout_s
        while True:
            failed = [(r, p.returncode) for r, p in enumerate(self.procs)
                      if p.poll() is not None and p.returncode != 0]
            if failed:
                alive = self.running()
                self.kill_all()
                self.join_readers()
                for r, code in failed:
                    how = f"signal {-code}" if code < 0 else f"exit code {code}"
                    self.say(f"rank {r} failed ({how})" + (f"; killed ranks {alive}" if alive else ""))
                return 1
            if not self.running():
                self.join_readers()
                return 0
            if time.monotonic() > deadline:
                alive = self.running()
                self.kill_all()
                self.join_readers()
                self.say(f"timed out after {timeout_s:g} s; ranks {alive} were still running and were killed")
                return 124
            time.sleep(0.05)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     usage="%(prog)s N [--timeout S] -- cmd [args...]")
    parser.add_argument("nprocs", type=int, help="number of ranks")
    parser.add_argument("--timeout", type=float, default=300.0, help="overall limit in seconds (default 300)")
    # Everything after the first "--" is the command, so that its own options never reach this parser.
    if "--" not in argv:
        parser.error("no command given (put it after --)")
    split = argv.index("--")
    args = parser.parse_args(argv[:split])
    cmd = argv[split + 1:]
    if args.nprocs < 1:
        parser.error("N must be at least 1")
    if not cmd:
        parser.error("no command given (put it after --)")

    job = Job(args.nprocs, cmd, sys.stdout.buffer)

    # A signal to the launcher (CTest's timeout, Ctrl-C) stops every rank before the launcher goes.
    def on_signal(signum, _frame):
        job.say(f"received signal {signum}; killing ranks {job.running()}")
        job.kill_all()
        job.join_readers()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return job.run(args.timeout)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
