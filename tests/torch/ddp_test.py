"""DDP training on nlccl equals DDP training on gloo: a small float64 MLP, identical seeds, 50
steps, both models trained side by side in the same processes (gloo is the default group, nlccl
a second group over the same ranks). Losses and parameters are compared after every step.

    ddp_test.py WORLD TOL PHASE...

TOL 0 compares bitwise, else max|a-b| <= TOL * max|b| per tensor. Each phase trains fresh models:
    plain     DDP's own gradient all-reduce
    skipK     negative control: at step K the nlccl model skips one gradient all-reduce (a comm
              hook); the comparison must hold before K and fail at K
    powersgd  both models use torch's PowerSGD comm hook, whose future callbacks issue
              all-reduces and wait for them
"""
import argparse
import copy

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.nn.parallel import DistributedDataParallel as DDP

import harness

STEPS = 50


def make_model():
    torch.manual_seed(1234)
    return nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                         nn.Linear(64, 1)).double()


def batch(step, rank):
    x = torch.randn(16, 20, generator=harness.generator("x", step, rank), dtype=torch.float64)
    return x, torch.sin(x.sum(1, keepdim=True))


def differs(a, b, tol):
    """A description of how a and b differ beyond tol, or None."""
    if tol == 0.0:
        if torch.equal(a, b):
            return None
    else:
        scale = b.abs().max().item()
        if (a - b).abs().max().item() <= tol * max(scale, 1e-300):
            return None
    return "max |diff| %.3g" % (a - b).abs().max().item()


class SkipOnce:
    """Comm hook state: the usual all-reduce, except for the first bucket at step `skip`, which
    keeps the local gradient (the planted bug of the negative control)."""

    def __init__(self, group, skip):
        self.group, self.skip, self.step, self.skipped = group, skip, -1, False


def skip_once_hook(state, bucket):
    if state.step == state.skip and not state.skipped:
        state.skipped = True
        fut = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut
    return default_hooks.allreduce_hook(state.group, bucket)


def train(rank, world, tol, nl, skip=None, use_powersgd=False):
    """Trains the gloo and nlccl models side by side; returns (first differing step, what
    differs) or None."""
    base = make_model()
    # Small buckets: several all-reduces per step, overlapping the backward pass.
    ddp = {name: DDP(copy.deepcopy(base), process_group=group, bucket_cap_mb=0.01)
           for name, group in (("gloo", dist.group.WORLD), ("nlccl", nl))}
    hook = None
    if use_powersgd:
        for name, group in (("gloo", dist.group.WORLD), ("nlccl", nl)):
            state = powersgd.PowerSGDState(process_group=group, matrix_approximation_rank=2,
                                           start_powerSGD_iter=3, min_compression_rate=0.5,
                                           random_seed=7)
            ddp[name].register_comm_hook(state, powersgd.powerSGD_hook)
    if skip is not None:
        hook = SkipOnce(nl, skip)
        ddp["nlccl"].register_comm_hook(hook, skip_once_hook)
    opts = {n: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for n, m in ddp.items()}
    for step in range(STEPS):
        if hook:
            hook.step = step
        x, y = batch(step, rank)
        losses = {}
        for name, model in ddp.items():
            opts[name].zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opts[name].step()
            losses[name] = loss.detach()
        diffs = []
        d = differs(losses["nlccl"], losses["gloo"], tol)
        if d:
            diffs.append("loss: " + d)
        for i, (p, q) in enumerate(zip(ddp["nlccl"].parameters(), ddp["gloo"].parameters())):
            d = differs(p.detach(), q.detach(), tol)
            if d:
                diffs.append("parameter %d: %s" % (i, d))
        if diffs:
            return step, diffs
    assert hook is None or hook.skipped, "the planted skip never ran"
    return None


def worker(rank, world, tol, phases):
    harness.init(rank, world, "gloo")
    nl = harness.nlccl_group()
    how = "bitwise" if tol == 0 else "within %g relative" % tol
    for phase in phases:
        if phase.startswith("skip"):
            skip = int(phase[4:])
            diff = train(rank, world, tol, nl, skip=skip)
            assert diff is not None, (
                "rank %d: skipping an all-reduce at step %d went unnoticed" % (rank, skip))
            assert diff[0] == skip, "rank %d: models differ at step %d, before the skip at %d: %s" % (
                rank, diff[0], skip, "; ".join(diff[1]))
            if rank == 0:
                print("negative control: the all-reduce skipped at step %d is caught (%s)" % (
                    skip, diff[1][0]), flush=True)
            continue
        assert phase in ("plain", "powersgd"), phase
        diff = train(rank, world, tol, nl, use_powersgd=phase == "powersgd")
        assert diff is None, "rank %d, %s, step %d: nlccl and gloo differ: %s" % (
            rank, phase, diff[0], "; ".join(diff[1]))
        if rank == 0:
            print("%d DDP steps on %d ranks%s: nlccl equals gloo (%s)" % (
                STEPS, world, " with PowerSGD" if phase == "powersgd" else "", how), flush=True)
    dist.destroy_process_group(nl)
    dist.destroy_process_group()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("world", type=int)
    ap.add_argument("tol", type=float)
    ap.add_argument("phases", nargs="+", help="plain, powersgd or skipK")
    a = ap.parse_args()
    harness.spawn(worker, a.world, a.tol, a.phases)
