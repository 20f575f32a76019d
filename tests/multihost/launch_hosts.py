#!/usr/bin/env python3
"""Starts an env:// job (torchrun-style variables) across the hosts of scripts/netns_cluster.sh.

    launch_hosts.py --hosts bh1,bh2 --per-host 2 [--port P] [--timeout S] -- cmd [args...]

Ranks fill the hosts in order (bh1 gets ranks 0 and 1, bh2 ranks 2 and 3), each started inside its host by
`netns_cluster.sh exec` with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR (the first host's
name: the TCPStore runs with rank 0 there) and MASTER_PORT. What a multi-node torchrun or a batch script
does, one launcher per node, folded into one process. Output lines are prefixed with "[bhN rank r] ". When a
rank fails the others are killed and the launcher exits 1 naming it (host, rank, exit code or signal);
after --timeout seconds it kills everyone and exits 124 naming the ranks still running.
"""

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_CLUSTER = os.path.join(_HERE, "..", "..", "scripts", "netns_cluster.sh")
# Variables that would make a rank believe another launcher started it (braid's detection prefers them).
_FOREIGN_LAUNCHER_PREFIXES = ("OMPI_", "PMIX_", "PMI_", "SLURM_")
_KILL_GRACE_S = 3.0


def main(argv):
    if "--" not in argv:
        raise SystemExit("launch_hosts: no command given (put it after --)")
    split = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", required=True, help="comma-separated host names, first one hosts rank 0")
    parser.add_argument("--per-host", type=int, default=2, help="ranks per host (default 2)")
    parser.add_argument("--port", type=int, default=29400, help="MASTER_PORT (default 29400: the hosts are fresh)")
    parser.add_argument("--timeout", type=float, default=300.0, help="overall limit in seconds (default 300)")
    args = parser.parse_args(argv[:split])
    cmd = argv[split + 1:]
    if not cmd:
        raise SystemExit("launch_hosts: no command given (put it after --)")
    hosts = [h for h in args.hosts.split(",") if h]
    size = len(hosts) * args.per_host
    base = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN_LAUNCHER_PREFIXES)}
    out_lock = threading.Lock()
    procs, readers, where = [], [], []

    def say(text):
        with out_lock:
            sys.stdout.write(f"launch_hosts: {text}\n")
            sys.stdout.flush()

    def pump(prefix, stream):
        for line in iter(stream.readline, b""):
            with out_lock:
                sys.stdout.buffer.write(prefix + (line if line.endswith(b"\n") else line + b"\n"))
                sys.stdout.flush()
        stream.close()

    def running():
        return [r for r, p in enumerate(procs) if p.poll() is None]

    def kill_all():
        # `exec` ends in an exec of the command, so each rank is the process started here, in its own session.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            alive = running()
            if not alive:
                break
            for r in alive:
                try:
                    os.killpg(procs[r].pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + _KILL_GRACE_S
            while running() and time.monotonic() < deadline:
                time.sleep(0.05)
        for p in procs:
            p.wait()
        for t in readers:
            t.join(timeout=10)

    for rank in range(size):
        host = hosts[rank // args.per_host]
        env = dict(base, RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(rank % args.per_host),
                   LOCAL_WORLD_SIZE=str(args.per_host), MASTER_ADDR=hosts[0], MASTER_PORT=str(args.port))
        try:
            p = subprocess.Popen([_CLUSTER, "exec", host] + cmd, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            kill_all()
            raise SystemExit(f"launch_hosts: cannot start rank {rank} on {host}: {e.strerror}") from e
        procs.append(p)
        where.append(host)
        t = threading.Thread(target=pump, args=(f"[{host} rank {rank}] ".encode(), p.stdout), daemon=True)
        t.start()
        readers.append(t)

    def on_signal(signum, _frame):
        say(f"received signal {signum}; killing ranks {running()}")
        kill_all()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    deadline = time.monotonic() + args.timeout
    while True:
        failed = [(r, p.returncode) for r, p in enumerate(procs) if p.poll() is not None and p.returncode != 0]
        if failed:
            alive = running()
            kill_all()
            for r, code in failed:
                how = f"signal {-code}" if code < 0 else f"exit code {code}"
                say(f"rank {r} on {where[r]} failed ({how})" + (f"; killed ranks {alive}" if alive else ""))
            # A rank that skipped (77) skips the job, when every failed rank skipped.
            return 77 if all(code == 77 for _, code in failed) else 1
        if not running():
            for t in readers:
                t.join(timeout=10)
            return 0
        if time.monotonic() > deadline:
            alive = running()
            kill_all()
            say(f"timed out after {args.timeout:g} s; ranks {alive} were still running and were killed")
            return 124
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
