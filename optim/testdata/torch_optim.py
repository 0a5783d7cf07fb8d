#!/usr/bin/python3
"""Writes torch_optim.json: reference trajectories of torch.optim optimizers.

Run from this directory with Debian's PyTorch (python3-torch, 1.13):

    /usr/bin/python3 torch_optim.py

Every case starts from the same float32 parameters and feeds the same float32
gradients for STEPS steps; torch computes in float64 from those values, and
the parameters after every step are written. optim's TestTorchReference
replays the gradients through the gonox optimizer of the same name and
compares. CI reads the JSON and needs no torch.
"""

import json
import math

import numpy as np
import torch

STEPS = 8
SHAPES = {"W": (3, 4), "B": (4,)}


def wave(n, seed):
    """n deterministic values (the optim tests' wave), rounded to float32."""
    v = [math.sin(0.9 * i + 1.7 * seed) * (0.5 + 0.25 * (i % 3)) for i in range(n)]
    return np.asarray(v, dtype=np.float32).astype(np.float64)


def params0():
    return {"W": wave(12, 0.3).reshape(3, 4), "B": wave(4, 0.8)}


def grads(step):
    return {"W": wave(12, 2 + step).reshape(3, 4), "B": wave(4, 5 + 2 * step)}


CASES = [
    ("SGD momentum", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
    ("SGD Nesterov", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True)),
    ("Adam", lambda p: torch.optim.Adam(p, lr=0.01)),
    ("AdamW", lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1)),
    ("RMSProp centered momentum", lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, eps=1e-3, centered=True, momentum=0.5)),
    ("Adagrad", lambda p: torch.optim.Adagrad(p, lr=0.1, eps=0, initial_accumulator_value=0.1)),
    ("Adagrad lr decay", lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.5, eps=0, initial_accumulator_value=0.3)),
    ("Adadelta", lambda p: torch.optim.Adadelta(p, lr=1.0, rho=0.9, eps=1e-6)),
    ("Adadelta weight decay", lambda p: torch.optim.Adadelta(p, lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1)),
    ("Adamax", lambda p: torch.optim.Adamax(p, lr=0.02)),
    ("Adamax options", lambda p: torch.optim.Adamax(p, lr=0.02, betas=(0.8, 0.9), eps=1e-3)),
    ("RAdam", lambda p: torch.optim.RAdam(p, lr=0.01, betas=(0.9, 0.9), eps=0)),
    # Plain SGD, PyTorch's L2 weight decay (added to the gradient before
    # momentum: gonox's AddDecayedWeights in front), Adam's options and its
    # L2 weight decay (not AdamW's decoupled one), RMSprop without centring,
    # with momentum and with weight decay, Adagrad and Adamax with weight
    # decay.
    ("SGD", lambda p: torch.optim.SGD(p, lr=0.05)),
    ("SGD momentum weight decay", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01)),
    ("SGD Nesterov weight decay", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.7, nesterov=True, weight_decay=0.1)),
    ("Adam options", lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.95), eps=1e-3)),
    ("Adam L2 weight decay", lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.1)),
    ("AdamW options", lambda p: torch.optim.AdamW(p, lr=0.02, betas=(0.85, 0.98), eps=1e-4, weight_decay=0.3)),
    ("RMSProp", lambda p: torch.optim.RMSprop(p, lr=0.01)),
    ("RMSProp momentum", lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, eps=1e-6, momentum=0.7)),
    ("RMSProp weight decay", lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.95, eps=1e-4, weight_decay=0.05)),
    ("Adagrad weight decay", lambda p: torch.optim.Adagrad(p, lr=0.1, eps=0, initial_accumulator_value=0.1, weight_decay=0.05)),
    ("Adamax weight decay", lambda p: torch.optim.Adamax(p, lr=0.02, weight_decay=0.1)),
    # torch.nn.utils.clip_grad_norm_ (max_norm below the gradients' norms,
    # about 2) before each step; it divides by norm + 1e-6, optax by the
    # norm.
    ("clip_grad_norm SGD momentum", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
]

CLIP = {"clip_grad_norm SGD momentum": 0.5}

# Optimizers under a learning-rate scheduler stepped after every
# optimizer step: the rate of update n is the schedule's value n.
CASES += [
    ("SGD momentum StepLR", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
    ("Adam CosineAnnealingLR", lambda p: torch.optim.Adam(p, lr=0.01)),
]
SCHED = {
    "SGD momentum StepLR": lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
    "Adam CosineAnnealingLR": lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=STEPS),
}

SCHED_STEPS = 25
LR0 = 0.1
S = torch.optim.lr_scheduler

# The learning rate of step n = 0, 1, ... of torch.optim.lr_scheduler
# (before the n-th optimizer step, scheduler.step() after it): gonox's
# Schedule(n). A case runs for its own number of steps (CosineAnnealingLR
# and the warmup-then-cosine SequentialLR
# stop at T_max, where PyTorch's rule turns back up; OneCycleLR at
# total_steps, past which PyTorch raises).
SCHEDULES = [
    ("StepLR", SCHED_STEPS, lambda o: S.StepLR(o, step_size=3, gamma=0.5)),
    ("ExponentialLR", SCHED_STEPS, lambda o: S.ExponentialLR(o, gamma=0.9)),
    ("MultiStepLR", SCHED_STEPS, lambda o: S.MultiStepLR(o, milestones=[4, 9], gamma=0.1)),
    ("ConstantLR", SCHED_STEPS, lambda o: S.ConstantLR(o, factor=0.5, total_iters=4)),
    ("LinearLR warmup", SCHED_STEPS, lambda o: S.LinearLR(o, start_factor=0.2, end_factor=1.0, total_iters=5)),
    ("LinearLR decay", SCHED_STEPS, lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=6)),
    ("PolynomialLR", SCHED_STEPS, lambda o: S.PolynomialLR(o, total_iters=8, power=2.0)),
    ("CosineAnnealingLR", 13, lambda o: S.CosineAnnealingLR(o, T_max=12, eta_min=0.001)),
    ("CosineAnnealingWarmRestarts", SCHED_STEPS, lambda o: S.CosineAnnealingWarmRestarts(o, T_0=5, eta_min=0.001)),
    ("CosineAnnealingWarmRestarts Tmult2", 21, lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.002)),
    ("warmup cosine", 21, lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.01, total_iters=5),
                                                                 S.CosineAnnealingLR(o, T_max=15)], milestones=[5])),
    ("warmup constant", SCHED_STEPS, lambda o: S.LinearLR(o, start_factor=0.1, total_iters=4)),
    ("warmup exponential", SCHED_STEPS, lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.25, total_iters=6),
                                                                      S.ExponentialLR(o, gamma=0.8)], milestones=[6])),
    ("OneCycleLR cos", 20, lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=20)),
    ("OneCycleLR linear three_phase", 20, lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=20, anneal_strategy="linear", three_phase=True)),
]


def schedule(make, steps):
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=LR0)
    sched = make(opt)
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        p.grad = torch.zeros(1)
        opt.step()
        sched.step()
    return lrs


def run(name, make):
    p0 = params0()
    ps = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in p0.items()}
    opt = make([ps["W"], ps["B"]])
    sched = SCHED[name](opt) if name in SCHED else None
    traj = []
    for step in range(STEPS):
        g = grads(step)
        for k in ps:
            ps[k].grad = torch.tensor(g[k], dtype=torch.float64)
        if name in CLIP:
            torch.nn.utils.clip_grad_norm_([ps["W"], ps["B"]], CLIP[name])
        opt.step()
        if sched is not None:
            sched.step()
        traj.append({k: ps[k].detach().numpy().ravel().tolist() for k in ps})
    return traj


# ReduceLROnPlateau on a fixed loss sequence with plateaus: the rate after
# each scheduler.step(loss), divided by the starting rate 1. gonox's
# ReduceOnPlateau applies its scale to the update whose loss decided it.
PLATEAU_LOSSES = [1.0, 0.9, 0.895, 0.893, 0.89, 0.8, 0.8, 0.81, 0.799, 0.79, 0.795, 0.8, 0.6, 0.6, 0.61,
                  0.6, 0.6, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.5]
PLATEAUS = [
    ("rel patience 1 cooldown 1", dict(factor=0.5, patience=1, cooldown=1, threshold=0.01, threshold_mode="rel", min_lr=0.1)),
    ("abs patience 2 cooldown 2", dict(factor=0.3, patience=2, cooldown=2, threshold=0.004, threshold_mode="abs")),
    ("rel patience 0", dict(factor=0.5, patience=0, threshold=1e-4, min_lr=0.01)),
]


def plateau(kw):
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=1.0)
    sched = S.ReduceLROnPlateau(opt, mode="min", **kw)
    lrs = []
    for loss in PLATEAU_LOSSES:
        sched.step(loss)
        lrs.append(opt.param_groups[0]["lr"])
    return lrs


def main():
    out = {
        "torch": torch.__version__,
        "steps": STEPS,
        "params": {k: v.ravel().tolist() for k, v in params0().items()},
        "grads": [{k: v.ravel().tolist() for k, v in grads(s).items()} for s in range(STEPS)],
        "cases": {name: run(name, make) for name, make in CASES},
        "schedules": {name: schedule(make, n) for name, n, make in SCHEDULES},
        "plateau_losses": PLATEAU_LOSSES,
        "plateaus": {name: plateau(kw) for name, kw in PLATEAUS},
    }
    with open("torch_optim.json", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
