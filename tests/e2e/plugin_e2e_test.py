#!/usr/bin/env python3
"""e2e_plugins: `braid run` with plugins, initial weights and `braid export`, under mpirun (docs/PLUGINS.md).

Usage: plugin_e2e_test.py BRAID MPIEXEC TEST_PLUGIN_DIR MY_NET_PLUGIN

  - a job whose loss, data kind and comm hook come from a plugin (tests/plugins/kit_plugin.cc) trains on two
    trainers with DDP: the plugin's hook runs, the loss is the plugin's;
  - a plugin whose model throws while building stops the whole job: every rank ends, the message names the
    plugin, the kind and the rank;
  - a plugin built against another braid version, a missing plugin file, a library that is not a plugin and
    one without braid_plugin_register stop every rank before the job starts, each with its reason;
  - FSDP (full_shard over 2 trainers) with checkpoints, `braid export` of the latest: full tensors; a new job
    that starts from the exported file (model.init_from) with no optimizer exports the same bytes again;
  - a strict init_from with a key too many fails naming the key, strict: false trains.
Every subprocess has a timeout; the first failure prints its output and exits 1."""
import json
import os
import re
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_checks import expect, run  # noqa: E402


def safetensors_header(path):
    """The JSON header of a safetensors file, read from the documented layout (8-byte length, then JSON)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)), 8 + n


def safetensors_data(path):
    header, start = safetensors_header(path)
    with open(path, "rb") as f:
        blob = f.read()[start:]
    return {k: blob[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items() if k != "__metadata__"}


def write_job(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def main():
    braid, mpiexec, plugin_dir, my_net = [os.path.abspath(a) if os.path.exists(a) else a for a in sys.argv[1:5]]
    kit = os.path.join(plugin_dir, "libkit_plugin.so")
    mpirun = [mpiexec, "-np", "2", "--oversubscribe", braid, "run"]
    with tempfile.TemporaryDirectory(prefix="braid-plugins-") as tmp:
        # A plugin's loss, data kind and comm hook.
        job = write_job(tmp, "kit.yaml", f"""name: kit
roles: {{trainers: 2}}
backend: gloo
plugins: [{kit}]
model: {{kind: mlp, args: {{in: 4, hidden: [8], out: 3}}, init_seed: 2}}
loss: abs_mean
data: {{kind: ramp, args: {{n: 96, features: 4, classes: 3}}}}
ddp: {{mode: outside, comm_hook: logged_allreduce}}
optimizer: {{kind: sgd, lr: 0.05}}
train: {{epochs: 1, batch_size: 8}}
log: {{interval: 2}}
""")
        r = run([braid, "check", job])
        expect("braid check lists the plugin and what it registered",
               r.returncode == 0 and "plugin test_kit 0.3" in r.stdout and "losses abs_mean" in r.stdout, r)
        r = run(mpirun + [job])
        losses = [float(x) for x in re.findall(r"step \d+/\d+ .*?loss (\d+\.\d+)", r.stdout)]
        expect(f"the plugin's loss, data kind and comm hook train 2 trainers under mpirun (losses {losses})",
               r.returncode == 0 and r.stderr.count("logged_allreduce: bucket 0") == 2 and len(losses) == 3
               and losses[-1] < losses[0], r)

        # A model that throws while building: the driver stops every rank, naming plugin, kind and rank.
        t0 = time.time()
        r = run(mpirun + [job, "--set", f"model={{plugin: {kit}, kind: throwing_net}}"], timeout=120)
        took = time.time() - t0
        canonical_kit = os.path.realpath(kit)
        m = re.search(r"plugin (\S+): model 'throwing_net' threw while building on rank (\d) \(trainer \d of 2\): "
                      r"out of cheese", r.stdout + r.stderr)
        expect(f"a model that throws while building ends the whole job in {took:.1f} s, naming the plugin, the kind "
               f"and rank {m.group(2) if m else '?'}", r.returncode != 0 and m is not None
               and m.group(1) == canonical_kit and took < 60, r)

        # Libraries that are not what the job says: every rank stops before the job starts, with the reason.
        cases = [
            ("built against another braid version", os.path.join(plugin_dir, "libwrong_version_plugin.so"),
             "was built against braid 0.0.9"),
            ("a missing plugin file", os.path.join(tmp, "libgone.so"), "libgone.so (model.plugin in"),
            ("a library that is not a plugin", os.path.join(plugin_dir, "libnot_a_plugin.so"), "not a braid plugin"),
            ("a plugin without braid_plugin_register", os.path.join(plugin_dir, "libno_register_plugin.so"),
             "missing entry point braid_plugin_register"),
        ]
        for what, lib, words in cases:
            t0 = time.time()
            r = run(mpirun + [job, "--set", f"model.plugin={lib}"], timeout=60)
            expect(f"{what}: every rank exits 2 in {time.time() - t0:.1f} s, saying so",
                   r.returncode == 2 and r.stderr.count(words) == 2 and "step" not in r.stdout, r)

        # FSDP with checkpoints, export, init_from, export again.
        ckpt = os.path.join(tmp, "ckpt")
        fsdp = write_job(tmp, "fsdp.yaml", f"""name: fsdp_export
roles: {{trainers: 2}}
backend: gloo
model: {{kind: mlp, args: {{in: 8, hidden: [12], out: 3}}, init_seed: 4}}
data: {{kind: synthetic, num_samples: 64, num_features: 8, num_classes: 3, seed: 1}}
optimizer: {{kind: adam, lr: 0.01}}
ddp: {{mode: none}}
fsdp: {{enabled: true, sharding_strategy: full_shard, wrap: ["0", "2"]}}
train: {{epochs: 1, batch_size: 8}}
checkpoint: {{dir: {ckpt}}}
log: {{interval: 4}}
""")
        r = run(mpirun + [fsdp], timeout=120)
        expect("an FSDP job (full_shard, 2 trainers) trains and checkpoints", r.returncode == 0 and
               os.path.exists(os.path.join(ckpt, "latest")), r)
        first = os.path.join(tmp, "first.safetensors")
        r = run([braid, "export", ckpt, "--format", "safetensors", "-o", first])
        header, _ = safetensors_header(first) if os.path.exists(first) else ({}, 0)
        shapes = {k: v["shape"] for k, v in header.items() if k != "__metadata__"}
        expect(f"braid export gathers the shards into full tensors {shapes}", r.returncode == 0 and shapes ==
               {"0.weight": [12, 8], "0.bias": [12], "2.weight": [3, 12], "2.bias": [3]}
               and header.get("__metadata__", {}).get("braid.job") == "fsdp_export", r)
        ckpt2 = os.path.join(tmp, "ckpt2")
        r = run(mpirun + [fsdp, "--steps", "1", "--set", "optimizer.kind=none", "--set", f"checkpoint.dir={ckpt2}",
                          "--set", f"model.init_from={first}"], timeout=120)
        expect("a job starts from the exported weights (model.init_from)", r.returncode == 0, r)
        second = os.path.join(tmp, "second.safetensors")
        r = run([braid, "export", ckpt2, "-o", second])
        expect("untrained, it exports the very same tensors, bit for bit",
               r.returncode == 0 and safetensors_data(first) == safetensors_data(second), r)

        # Strictness: a file with an extra key.
        r = run(mpirun + [fsdp, "--steps", "1", "--set", "model.args.hidden=[12, 5]", "--set", f"model.init_from={first}",
                          "--set", f"checkpoint.dir={os.path.join(tmp, 'ckpt3')}"], timeout=120)
        expect("a strict init_from that does not fit fails naming the missing key",
               r.returncode != 0 and "model.init_from: " in r.stderr + r.stdout and
               "Missing key(s) in state_dict" in r.stderr + r.stdout, r)
    print("e2e_plugins: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
