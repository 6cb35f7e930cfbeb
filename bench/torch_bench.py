#!/usr/bin/python3
"""nlccl beside gloo under torch.distributed, in the same run: an all-reduce sweep of torch
tensors and the step time of DDP training, as ratios (gloo time / nlccl time: above 1 means
nlccl is faster).

    PYTHONPATH=build/src/bindings/torch/python /usr/bin/python3 bench/torch_bench.py \
        [--world 2] [--min 1K] [--max 64M] [--factor 4] [--rounds 5] [--ddp-steps 30]
        [--batch 32 1]

Ranks are processes on 127.0.0.1 (torch.multiprocessing.spawn) with one torch thread each; the
default group is gloo, a second group over the same ranks is nlccl. The two take turns (rounds of
all-reduces per size, single DDP steps) so that both see the same load on a shared machine; a
time is the slowest rank's, the median over rounds (all-reduce) or the mean over steps (DDP).
"""
import argparse
import copy
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import nlccl_torch  # noqa: F401  (registers "nlccl")


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s)


def fmt_size(n):
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return "%d%s" % (n // scale, unit)
    return str(n)


def slowest(seconds):
    """The largest value over the ranks (through gloo, outside any timed region)."""
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def time_allreduce(group, x, iters):
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x, group=group)
    return slowest((time.perf_counter() - t0) / iters)


def sweep(rank, world, args, groups):
    rows = []
    size = args.min
    while size <= args.max:
        x = torch.ones(size // 4, dtype=torch.float32)
        iters = max(2, min(40, (64 << 20) // (size * world)))
        for _, g in groups:  # warm-up: connections, plans, scratch
            time_allreduce(g, x, 2)
        times = {name: [] for name, _ in groups}
        for _ in range(args.rounds):
            for name, g in groups:
                times[name].append(time_allreduce(g, x, iters))
        t = {name: statistics.median(v) for name, v in times.items()}
        rows.append((size, iters * args.rounds, t["nlccl"], t["gloo"]))
        size *= args.factor
    return rows


def ddp_step_time(rank, world, args, groups, batch):
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))
    params = sum(p.numel() for p in base.parameters())
    x = torch.randn(batch, 512)
    y = torch.randint(0, 10, (batch,))
    models = {name: DDP(copy.deepcopy(base), process_group=g) for name, g in groups}
    opts = {name: torch.optim.SGD(m.parameters(), lr=0.01) for name, m in models.items()}

    def step(name):
        opts[name].zero_grad()
        nn.functional.cross_entropy(models[name](x), y).backward()
        opts[name].step()
    for _ in range(3):
        for name in models:
            step(name)
    total = {name: 0.0 for name in models}
    for _ in range(args.ddp_steps):
        for name in models:  # one step each in turn
            dist.barrier()
            t0 = time.perf_counter()
            step(name)
            total[name] += slowest(time.perf_counter() - t0)
    result = {name: t / args.ddp_steps for name, t in total.items()}
    # The same steps without communication, for scale.
    model = copy.deepcopy(base)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    t0 = time.perf_counter()
    for _ in range(args.ddp_steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    result["compute"] = slowest((time.perf_counter() - t0) / args.ddp_steps)
    return params, result


def worker(rank, world, port, args):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    nl = dist.new_group(backend="nlccl")
    groups = [("nlccl", nl), ("gloo", dist.group.WORLD)]
    rows = sweep(rank, world, args, groups)
    ddps = [(b,) + ddp_step_time(rank, world, args, groups, b) for b in args.batch]
    if rank == 0:
        print("all-reduce of float32 torch tensors, %d ranks (time per call, slowest rank)" % world)
        print("%8s %6s %12s %12s %10s %14s" % (
            "size", "iters", "nlccl us", "gloo us", "gloo/nlccl", "nlccl busbw GB/s"))
        for size, iters, tn, tg in rows:
            busbw = size / tn * 2 * (world - 1) / world / 1e9
            print("%8s %6d %12.1f %12.1f %10.2f %14.3f" % (
                fmt_size(size), iters, tn * 1e6, tg * 1e6, tg / tn, busbw))
        print()
        for batch, params, ddp in ddps:
            print("DDP step, MLP of %d float32 parameters, batch %d per rank, %d steps, %d ranks:"
                  % (params, batch, args.ddp_steps, world))
            print("  nlccl %.2f ms   gloo %.2f ms   gloo/nlccl %.2f   (without DDP: %.2f ms)" % (
                ddp["nlccl"] * 1e3, ddp["gloo"] * 1e3, ddp["gloo"] / ddp["nlccl"],
                ddp["compute"] * 1e3))
    dist.destroy_process_group(nl)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--min", type=parse_size, default=parse_size("1K"))
    ap.add_argument("--max", type=parse_size, default=parse_size("64M"))
    ap.add_argument("--factor", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ddp-steps", type=int, default=30)
    ap.add_argument("--batch", type=int, nargs="+", default=[32, 1],
                    help="DDP batch sizes per rank (32: compute-bound, 1: communication-bound)")
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(args.world, port, args), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
