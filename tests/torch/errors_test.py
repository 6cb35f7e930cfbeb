"""Unsupported dtypes and ops raise clear errors (and leave the group usable); the Work API
(wait with a timeout, is_completed, get_future) behaves as torch.distributed expects.

    errors_test.py          (2 processes, "nlccl" as the default group)
"""
import datetime

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

import harness


def raises(ck, name, fn, *needles):
    """fn() must raise a RuntimeError whose message contains every needle."""
    ck.count += 1
    try:
        fn()
    except RuntimeError as e:
        missing = [n for n in needles if n not in str(e)]
        if missing:
            ck.failures.append("rank %d: %s: message %r lacks %r" % (ck.rank, name, str(e), missing))
        return
    ck.failures.append("rank %d: %s did not raise" % (ck.rank, name))


def check_unsupported(ck, rank, world):
    raises(ck, "int16 all_reduce", lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)),
           "nlccl_torch", "allreduce", "Short", "nlccl reduces")
    raises(ck, "uint8 view of complex, PRODUCT",
           lambda: dist.all_reduce(torch.ones(4, dtype=torch.complex64).view(torch.int16),
                                   op=ReduceOp.PRODUCT), "Short")
    for name in ("BAND", "BOR", "BXOR"):
        raises(ck, "all_reduce ReduceOp.%s" % name,
               lambda name=name: dist.all_reduce(torch.ones(4), op=getattr(ReduceOp, name)),
               "does not support ReduceOp.%s" % name, "nlccl reduces with")
    raises(ck, "bool AVG", lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool),
                                                   op=ReduceOp.AVG), "cannot average bool")
    raises(ck, "int16 reduce_scatter",
           lambda: dist.reduce_scatter(torch.empty(2, dtype=torch.int16),
                                       [torch.ones(2, dtype=torch.int16)] * world), "Short")
    raises(ck, "all_gather list length",
           lambda: dist.all_gather([torch.empty(3)], torch.ones(3)), "one tensor per rank")
    raises(ck, "uneven splits that do not add up",
           lambda: dist.all_to_all_single(torch.empty(4), torch.ones(4), [1] * world, [3] * world),
           "split sizes add up to")
    raises(ck, "receive from any source", lambda: dist.recv(torch.empty(2)), "recvAnysource")
    raises(ck, "send to a rank out of range", lambda: dist.send(torch.ones(2), world + 3),
           "out of range")


def check_still_usable(ck, rank, world):
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t)
    ck.same("all_reduce after errors", t, torch.full((5,), float(world * (world + 1) // 2)))
    # Data movement takes any dtype (moved as bytes where nlccl has no such type).
    x = torch.arange(6, dtype=torch.int16) * (rank + 1)
    dist.broadcast(x, src=1)
    ck.same("int16 broadcast", x, torch.arange(6, dtype=torch.int16) * 2)
    # torch all-reduces complex tensors as their real view (SUM).
    c = torch.tensor([complex(rank, 1)] * 2, dtype=torch.complex64)
    dist.all_reduce(c)
    ck.same("complex all_reduce", c, torch.tensor([complex(world * (world - 1) // 2, world)] * 2,
                                                  dtype=torch.complex64))
    z = torch.tensor([complex(rank, -rank)] * 3, dtype=torch.complex64)
    out = [torch.empty_like(z) for _ in range(world)]
    dist.all_gather(out, z)
    for r in range(world):
        ck.same("complex all_gather from %d" % r, out[r],
                torch.tensor([complex(r, -r)] * 3, dtype=torch.complex64))


def check_work_api(ck, rank, world):
    t = torch.full((1000,), float(rank))
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    seen = []
    chained = fut.then(lambda f: seen.append(f.value()[0].sum().item()) or f.value())
    work.wait()
    ck.true("is_completed after wait", work.is_completed())
    want = torch.full((1000,), float(world * (world - 1) // 2))
    ck.same("future value", fut.wait()[0], want)
    chained.wait()
    ck.true("then() callback ran", seen == [want.sum().item()], str(seen))
    ck.same("result()", work.result()[0], want)

    # wait(timeout) raises when the peer has not sent yet; the receive still completes later.
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        buf = torch.zeros(3)
        req = dist.irecv(buf, 1)
        raises(ck, "wait(timeout) before the send",
               lambda: req.wait(datetime.timedelta(milliseconds=200)), "did not complete within")
        ck.true("is_completed before the send", not req.is_completed())
        store.set("errors_test/go", "1")
        req.wait()
        ck.same("receive after the timeout", buf, torch.tensor([7.0, 8.0, 9.0]))
    elif rank == 1:
        store.wait(["errors_test/go"])
        dist.send(torch.tensor([7.0, 8.0, 9.0]), 0)
    dist.barrier()


def worker(rank, world):
    harness.init(rank, world, "nlccl")
    ck = harness.Checks(rank)
    check_unsupported(ck, rank, world)
    check_still_usable(ck, rank, world)
    check_work_api(ck, rank, world)
    ck.finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    harness.spawn(worker, 2)
