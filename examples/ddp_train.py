#!/usr/bin/python3
"""Data-parallel training on nlccl: a small regression MLP trained with DistributedDataParallel
over the "nlccl" torch.distributed backend, every rank a process on this host (127.0.0.1).

Start the ranks with torch.multiprocessing.spawn:

    /usr/bin/python3 examples/ddp_train.py --world 4

or with torchrun (one process per rank; torchrun sets RANK, WORLD_SIZE, MASTER_ADDR, ...):

    torchrun --nnodes 1 --nproc_per_node 4 --master_addr 127.0.0.1 --master_port 29500 \\
        --redirects 1 --tee 1 examples/ddp_train.py

(--redirects 1 --tee 1 works around a bug of Debian's torchrun 1.13 under Python 3.11, whose
defaults fail with "'NoneType' object has no attribute 'get'".)

nlccl_torch must be importable: installed (cmake --install) or, from a build tree,
PYTHONPATH=build/src/bindings/torch/python. Debian's torch runs on /usr/bin/python3.
"""
import argparse
import datetime
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import nlccl_torch  # noqa: F401  (registers the "nlccl" backend)


def train(rank, world, steps):
    torch.set_num_threads(1)  # the ranks share this host's cores
    # A dead or stuck rank becomes an exception on the others after this timeout, not a hang.
    dist.init_process_group("nlccl", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    torch.manual_seed(0)  # the same initial model everywhere (DDP also broadcasts rank 0's)
    model = DDP(nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(100 + rank)  # each rank its own shard of data
    for step in range(steps):
        x = torch.randn(32, 8, generator=data)
        y = (x[:, :4].sum(dim=1, keepdim=True) - x[:, 4:].sum(dim=1, keepdim=True)).tanh()
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()  # gradients are all-reduced over nlccl here
        opt.step()
        avg = loss.detach().clone()
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)
        if rank == 0 and (step % 20 == 0 or step == steps - 1):
            print("step %3d  mean loss over %d ranks %.5f" % (step, world, avg.item()), flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description="DDP training on the nlccl backend")
    ap.add_argument("--world", type=int, default=2, help="ranks to spawn (without torchrun)")
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    if "RANK" in os.environ:  # started by torchrun
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args.steps)
        return
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    mp.spawn(train, args=(args.world, args.steps), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
