#!/usr/bin/env python3
"""No braid server listens on every interface by default, and each one refuses a stranger.

Runs the hybrid job (6 ranks: trainers, a parameter-server worker, a master; TCPStore, RPC, gloo, the
status server) under `braid launch` with RPC over TCP and under mpirun on the default transport (auto), reads every rank's own listening sockets from
/proc (the socket inodes among /proc/PID/fd, looked up in /proc/PID/net/tcp and tcp6), and fails on one
bound to 0.0.0.0 or ::. Then it connects to each of those listeners as a stranger: it must get braid's
40-byte challenge (or nothing, for gloo and Open MPI, which are not braid's) and, after a wrong response,
a closed connection, never data.

Usage: listen_sockets_test.py PATH_TO_BRAID MPIEXEC"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "..", "..", "examples", "hybrid", "job.yaml")
TOKEN_NAME = "BRAID_LISTEN_TEST_TOKEN"
WILDCARDS = {"0.0.0.0", "::"}


def hex_to_addr(text, v6):
    raw = bytes.fromhex(text)
    if not v6:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]
    return socket.inet_ntop(socket.AF_INET6, b"".join(words))


def listeners(pid):
    """(address, port) of every TCP socket in LISTEN state that process `pid` holds."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            m = re.match(r"socket:\[(\d+)\]", target)
            if m:
                inodes.add(m.group(1))
    except OSError:
        return []
    found = []
    for name, v6 in (("tcp", False), ("tcp6", True)):
        try:
            with open(f"/proc/{pid}/net/{name}") as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            local, state, inode = cols[1], cols[3], cols[9]
            if state == "0A" and inode in inodes:
                addr, port = local.split(":")
                found.append((hex_to_addr(addr, v6), int(port, 16)))
    return found


def tagged_pids(token, braid):
    """The braid processes (not mpirun, not the launcher's helpers) that carry `token`."""
    pids = []
    exe = os.path.realpath(braid)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                tagged = token.encode() in f.read().split(b"\0")
            if tagged and os.path.realpath(f"/proc/{pid}/exe") == exe:
                pids.append(int(pid))
        except OSError:
            continue
    return pids


def stranger_is_refused(addr, port):
    """Connects without the secret. Returns None when the listener is braid's and refused us properly,
    'not braid' when it sent no challenge (gloo's, Open MPI's), or a description of what went wrong."""
    try:
        s = socket.create_connection((addr, port), timeout=3)
    except OSError as e:
        return f"cannot connect: {e}"
    with s:
        s.settimeout(3)
        try:
            challenge = s.recv(40)
        except socket.timeout:
            return "not braid"
        except OSError:
            return "not braid"
        if not challenge.startswith(b"BRAIDAU1"):
            return "not braid"
        while len(challenge) < 40:
            challenge += s.recv(40 - len(challenge))
        s.sendall(b"\0" * 64)  # a response with a wrong MAC
        try:
            rest = s.recv(256)
        except OSError:
            rest = b""
        return None if rest == b"" else f"sent {len(rest)} bytes after a wrong response"


def run_case(name, argv, env, braid, min_braid_listeners):
    token = uuid.uuid4().hex
    env = dict(env)
    env[TOKEN_NAME] = token
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    seen = {}
    deadline = time.monotonic() + 90
    braid_listeners = 0
    try:
        # Sample until every rank has its servers up (the store and RPC agent, plus the driver's status
        # server): at least 6 ranks with listeners, seen twice in a row.
        stable = 0
        while time.monotonic() < deadline and proc.poll() is None:
            pids = tagged_pids(f"{TOKEN_NAME}={token}", braid)
            for pid in pids:
                for entry in listeners(pid):
                    seen.setdefault(entry, pid)
            ranks_listening = len({pid for pid in seen.values()})
            stable = stable + 1 if ranks_listening >= 6 else 0
            if stable >= 3:
                break
            time.sleep(0.2)
        problems = []
        for (addr, port), pid in sorted(seen.items()):
            if addr in WILDCARDS:
                problems.append(f"pid {pid} listens on {addr}:{port}")
        for (addr, port), pid in sorted(seen.items()):
            if (addr, port) not in listeners(pid):
                continue  # a transient listener (gloo's pairs connect through one), gone by now
            verdict = stranger_is_refused(addr, port)
            if verdict == "not braid":
                continue
            if verdict is None:
                braid_listeners += 1
            else:
                problems.append(f"pid {pid} {addr}:{port}: {verdict}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
    print(f"{name}: {len(seen)} listening sockets in {len(set(seen.values()))} processes, "
          f"{braid_listeners} of them braid's, each refused a stranger")
    for (addr, port), pid in sorted(seen.items()):
        print(f"  pid {pid}: {addr}:{port}")
    if len(set(seen.values())) < 6:
        problems.append(f"only {len(set(seen.values()))} processes were seen listening (the job did not start?)\n"
                        + out[-3000:])
    if braid_listeners < min_braid_listeners:
        problems.append(f"only {braid_listeners} braid listeners answered with a challenge\n" + out[-3000:])
    return problems


def main():
    braid, mpiexec = sys.argv[1], sys.argv[2]
    env = dict(os.environ)
    for k in ("BRAID_BIND_ANY", "BRAID_SOCKET_IFNAME", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        env.pop(k, None)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    with tempfile.TemporaryDirectory() as tmp:
        args = ["run", JOB, "--set", "train.epochs=100000", "--set", f"status_file={tmp}/status"]
        # RPC over tcp: a store, six RPC agents, the status server, at least store + RPC answer as braid's.
        problems = run_case("braid launch", [braid, "launch", "-n", "6", "--", braid] + args +
                            ["--set", "rpc.transport=tcp"], env, braid, 7)
        # The default transport (auto: ucx when built with it, whose listeners are UCX's own, bound to an
        # interface's address, never a wildcard): at least the store answers as braid's (UCX's listeners are
        # up before the driver's status server, so the sampling may end before that one is; the launch case
        # checks it).
        problems += run_case("mpirun", [mpiexec, "-np", "6", "--oversubscribe", "--mca", "btl", "self,vader",
                                        braid] + args, env, braid, 1)
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
