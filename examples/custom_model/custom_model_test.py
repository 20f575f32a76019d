#!/usr/bin/env python3
"""example/custom_model: `braid` rejects a job naming my_net, my_braid accepts it and trains it on two ranks."""
import re
import subprocess
import sys


def run(cmd, timeout=90):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def main():
    my_braid, braid, job = sys.argv[1:4]
    failures = []

    def expect(name, ok, r):
        print(("ok   " if ok else "FAIL ") + name)
        if not ok:
            failures.append(name)
            print(f"  exit {r.returncode}\n  stdout: {r.stdout[-2000:]}\n  stderr: {r.stderr[-2000:]}")

    r = run([braid, "check", job])
    expect("braid does not know my_net", r.returncode == 2 and "unknown model 'my_net'" in r.stderr, r)
    r = run([my_braid, "check", job])
    expect("my_braid validates the job", r.returncode == 0 and "model my_net" in r.stdout, r)
    r = run([my_braid, "launch", "-n", "2", "--", my_braid, "run", job])
    losses = [float(x) for x in re.findall(r"loss (\d+\.\d+)", r.stdout)]
    expect("my_braid trains my_net on 2 ranks, loss falls",
           r.returncode == 0 and len(losses) >= 2 and losses[-1] < losses[0], r)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
