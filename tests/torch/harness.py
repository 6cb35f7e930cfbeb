"""Shared helpers of the torch backend tests: ranks are processes started with
torch.multiprocessing.spawn, talking over 127.0.0.1 only."""
import datetime
import os
import socket
import sys
import zlib

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import nlccl_torch  # noqa: F401  (registers the "nlccl" backend)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, fn, world, port, args):
    torch.set_num_threads(1)  # many ranks share few cores
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    fn(rank, world, *args)


def spawn(fn, world, *args):
    """Runs fn(rank, world, *args) in `world` processes; raises if any of them raised."""
    mp.spawn(_entry, args=(fn, world, free_port(), args), nprocs=world, join=True)


def init(rank, world, backend="gloo", timeout_s=60):
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))


def nlccl_group(timeout_s=30):
    """An nlccl group over every rank. new_group's timeout defaults to 30 minutes, not to
    init_process_group's: a test that deadlocks must fail sooner than that."""
    return dist.new_group(backend="nlccl", timeout=datetime.timedelta(seconds=timeout_s))


def generator(*salt):
    g = torch.Generator()
    g.manual_seed(zlib.crc32(repr(salt).encode()))  # the same in every process
    return g


def ints(shape, dtype, lo, hi, *salt):
    """Integers in [lo, hi] as `dtype`: exact in every dtype tested, so sums, products, minima
    and maxima do not depend on the order in which a backend combines them."""
    return torch.randint(lo, hi + 1, shape, generator=generator(*salt)).to(dtype)


class Checks:
    """Collects mismatches so that one run reports all of them."""

    def __init__(self, rank):
        self.rank = rank
        self.count = 0
        self.failures = []

    def same(self, name, got, want, rtol=0.0):
        self.count += 1
        ok = got.dtype == want.dtype and got.shape == want.shape
        if ok:
            if rtol == 0.0:
                ok = torch.equal(got, want)
            else:
                ok = torch.allclose(got.double(), want.double(), rtol=rtol, atol=0.0)
        if not ok:
            self.failures.append("rank %d: %s: got %s %s %s, want %s %s %s" % (
                self.rank, name, got.dtype, tuple(got.shape), got.flatten()[:6].tolist(),
                want.dtype, tuple(want.shape), want.flatten()[:6].tolist()))

    def true(self, name, cond, detail=""):
        self.count += 1
        if not cond:
            self.failures.append("rank %d: %s %s" % (self.rank, name, detail))

    def finish(self):
        if self.failures:
            raise AssertionError("%d of %d checks failed:\n  %s" % (
                len(self.failures), self.count, "\n  ".join(self.failures)))
        if self.rank == 0:
            print("%d checks passed" % self.count, flush=True)


if __name__ == "__main__":
    sys.exit("harness.py is a library for the tests in this directory")
