#!/usr/bin/env python3
"""Reference values for the hybrid parameter-server model of PyTorch's ddp_under_dist_autograd_test.py
(tests/mp/dist_autograd/da_hybrid_test.cc and da_ddp_modes_test.cc), computed in one process with
PyTorch's local autograd.

The distributed job is simulated exactly: each trainer's forward runs RemoteEM, fc1, RemoteNet and fc2
on the same tensors the trainer would send; DDP's allreduce is the mean of the trainers' gradients over the
initial world size (joined trainers contribute zeros). Run with a Python that has torch:

    /usr/bin/python3 tests/mp/dist_autograd/hybrid_reference.py

It prints the values the tests compare against (they are also what PyTorch 1.13's
DdpUnderDistAutogradTest computes with gloo, and hybrid_reference.txt holds them).
"""
import torch

NUM_TRAINERS = 4


def get_linear(d_in, d_out):
    lin = torch.nn.Linear(d_in, d_out, bias=False)
    with torch.no_grad():
        lin.weight.fill_(1.0)
        lin.weight[0][0] = -1.0
    return lin


def training_examples():
    rows = []
    for value in (-1, 1):
        for x in (-1.0 * value, 1.0 * value):
            for y in (1.0 * value, -1.0 * value):
                for z in (0, 1):
                    rows.append(((x, y), z, value))
    per = len(rows) // NUM_TRAINERS
    out = []
    for t in range(NUM_TRAINERS):
        block = rows[t * per:(t + 1) * per]
        out.append((torch.tensor([r[0] for r in block]), torch.tensor([r[1] for r in block]),
                    torch.tensor([float(r[2]) for r in block])))
    return out


def trainer_grads(dense, sparse, values):
    """One trainer's iteration: returns the gradients of fc1, fc2 (local) and em, net (remote)."""
    em = torch.nn.EmbeddingBag(2, 3)
    with torch.no_grad():
        em.weight.fill_(0.5)
    net = get_linear(5, 3)
    fc1, fc2 = get_linear(2, 2), get_linear(3, 1)
    sparse_out = em(sparse, torch.arange(sparse.shape[0]))
    x = torch.cat((fc1(dense), sparse_out), 1)
    output = fc2(torch.relu(net(x)))
    (output * values).sum().backward()
    return fc1.weight.grad, fc2.weight.grad, em.weight.grad, net.weight.grad, output


def main():
    examples = training_examples()
    none = [trainer_grads(*e) for e in examples]
    print("NONE mode:")
    for t, (g1, g2, gem, gnet, out) in enumerate(none):
        print(f"  trainer {t}: fc1 {g1.tolist()} fc2 {g2.tolist()}")
    print(f"  trainer 0 output {none[0][4].flatten().tolist()}, worker4 em {none[0][2].tolist()}, "
          f"net {none[0][3].tolist()}")
    mean = lambda gs: sum(gs) / NUM_TRAINERS
    print("INSIDE (fc2 averaged):", mean([g[1] for g in none]).tolist())
    print("OUTSIDE (fc1, fc2 averaged):", mean([g[0] for g in none]).tolist(), mean([g[1] for g in none]).tolist())
    # Uneven: micro-batches of 2 rows, trainers 0 and 1 keep only the first; the loss uses the whole
    # mini-batch's values (the torch test's literal semantics).
    first = [trainer_grads(d[:2], s[:2], v) for d, s, v in examples]
    second = [trainer_grads(d[2:], s[2:], v) if t >= 2 else None for t, (d, s, v) in enumerate(examples)]
    print("OUTSIDE uneven, micro-batch 1 (all active):", mean([g[0] for g in first]).tolist(),
          mean([g[1] for g in first]).tolist())
    active = [g for g in second if g is not None]
    print("OUTSIDE uneven, micro-batch 2 (trainers 2, 3; / 4):", (sum(g[0] for g in active) / NUM_TRAINERS).tolist(),
          (sum(g[1] for g in active) / NUM_TRAINERS).tolist())


if __name__ == "__main__":
    main()
