#!/usr/bin/python3
"""Writes torch_parity3.json: the references of optim's TestTorchParity3
(torch_parity3_test.go), from PyTorch 1.13, in the form of torch_optim.json
and from the same parameters and gradients (torch_optim.py's params0 and
grads):

- "cases": trajectories of torch.optim.SGD with dampening (with and
  without weight decay), under a CyclicLR;
- "schedules": the rates of torch.optim.lr_scheduler.CyclicLR (triangular,
  triangular2, exp_range, uneven up and down) and of OneCycleLR with cosine
  annealing and three_phase=True.

Run from this directory with Debian's PyTorch (python3-torch, 1.13):

    /usr/bin/python3 torch_parity3.py

and commit the JSON: CI does not need torch.
"""

import json

import torch

import sys
sys.dont_write_bytecode = True
from torch_optim import STEPS, grads, params0, schedule

S = torch.optim.lr_scheduler

CASES = [
    ("SGD dampening", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.3), None),
    ("SGD dampening 1", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.5, dampening=1.0), None),
    ("SGD dampening weight decay", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, dampening=0.5, weight_decay=0.1), None),
    ("SGD momentum CyclicLR", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
     lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3, cycle_momentum=False)),
]

# CyclicLR's rate is set at construction (base_lr): the schedule helper
# reads the rate before each step, as gonox's Schedule(n).
SCHEDULES = [
    ("CyclicLR triangular", 25, lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4, cycle_momentum=False)),
    ("CyclicLR triangular up 3 down 5", 25, lambda o: S.CyclicLR(o, base_lr=0.02, max_lr=0.2, step_size_up=3,
                                                                     step_size_down=5, cycle_momentum=False)),
    ("CyclicLR triangular2", 30, lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3, mode="triangular2",
                                                      cycle_momentum=False)),
    ("CyclicLR exp_range", 30, lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2, step_size_down=4,
                                                    mode="exp_range", gamma=0.9, cycle_momentum=False)),
    ("OneCycleLR cos three_phase", 20, lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=20, three_phase=True)),
]


def run(make, sched):
    ps = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in params0().items()}
    opt = make([ps["W"], ps["B"]])
    sc = sched(opt) if sched else None
    traj = []
    for step in range(STEPS):
        g = grads(step)
        for k in ps:
            ps[k].grad = torch.tensor(g[k], dtype=torch.float64)
        opt.step()
        if sc is not None:
            sc.step()
        traj.append({k: ps[k].detach().numpy().ravel().tolist() for k in ps})
    return traj


def main():
    out = {
        "torch": torch.__version__,
        "steps": STEPS,
        "params": {k: v.ravel().tolist() for k, v in params0().items()},
        "grads": [{k: v.ravel().tolist() for k, v in grads(s).items()} for s in range(STEPS)],
        "cases": {name: run(make, sched) for name, make, sched in CASES},
        "schedules": {name: schedule(make, n) for name, n, make in SCHEDULES},
    }
    with open("torch_parity3.json", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
