"""What the Python test scripts share (tests/install/, tests/e2e/plugin_e2e_test.py): running commands with a
clean launcher environment and a timeout, and printing each check as `ok   what` or `FAIL what` with the
output of the command that failed it (the first failure exits 1)."""
import os
import subprocess
import sys

# Set by a launcher around the test (mpirun, srun, braid launch): a command the test starts must not inherit
# them, or it would take itself for a rank of that job.
LAUNCHER_VARS = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "RANK",
                 "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "BRAID_LOG_LEVEL", "BRAID_LOG")


def clean_env(extra=None):
    e = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    e.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    e.update(extra or {})
    return e


def run(cmd, timeout=240, extra_env=None, **kw):
    return subprocess.run(cmd, env=clean_env(extra_env), capture_output=True, text=True, timeout=timeout, **kw)


def fail(what, r=None):
    print(f"FAIL {what}")
    if r is not None:
        print(f"--- {' '.join(map(str, r.args))}\n--- exit {r.returncode}\n--- stdout\n{r.stdout[-4000:]}\n"
              f"--- stderr\n{r.stderr[-6000:]}")
    sys.exit(1)


def expect(what, ok, r=None):
    if not ok:
        fail(what, r)
    print(f"ok   {what}")
