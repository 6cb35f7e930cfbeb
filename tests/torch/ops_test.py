"""Every operation of the nlccl backend against gloo on the same inputs, in the same processes:
the default group is gloo, a second group over the same ranks is nlccl.

    ops_test.py WORLD

Inputs are small integers (exact in every dtype, so results do not depend on the order of
reduction) plus random floats compared with a tolerance at 3 ranks. Where gloo lacks an
operation (reduce_scatter, list all-to-all, _allgather_base), the reference is built from gloo
operations it has.
"""
import sys

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

import harness

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int64]
MORE_DTYPES = [torch.float16, torch.int32, torch.int8, torch.uint8, torch.bool]
SHAPES = [(1,), (37,), (5, 7), (3001,)]


def listed(r):
    return [r] if isinstance(r, torch.Tensor) else list(r)


def gloo(op, gl, dtype, inputs):
    """op on gloo. Gloo 1.13 lacks some dtypes (bfloat16 arithmetic among them: "Invalid scalar
    type"); those run as float64 and are converted back, which is exact for the small integer
    inputs the tests give them."""
    try:
        return op(gl, *[x.clone() for x in inputs])
    except RuntimeError as e:
        if "Invalid scalar type" not in str(e):
            raise
    return [r.to(dtype) for r in listed(op(gl, *[x.double() for x in inputs]))]


def run_both(ck, name, nl, gl, op, inputs, dtype):
    """op(group, *clones of inputs) -> result tensor(s), compared between nlccl and gloo."""
    got = listed(op(nl, *[x.clone() for x in inputs]))
    want = listed(gloo(op, gl, dtype, inputs))
    ck.true("%s: result count" % name, len(got) == len(want))
    for i, (g, w) in enumerate(zip(got, want)):
        ck.same("%s[%d]" % (name, i), g, w)


def gloo_inplace(fn, t):
    """fn(t) on gloo, in place (through float64 where gloo lacks the dtype, see gloo())."""
    def op(_, x):
        fn(x)
        return x
    t.copy_(listed(gloo(op, None, t.dtype, [t]))[0])
    return t


def reduce_inputs(op, shape, dtype, rank, salt):
    if op == ReduceOp.PRODUCT:  # |x| in {1, 2} keeps products exact
        mag = harness.ints(shape, torch.int64, 1, 2, salt, "mag", rank)
        sign = harness.ints(shape, torch.int64, 0, 1, salt, "sign", rank) * 2 - 1
        return (mag * sign).to(dtype)
    if dtype == torch.bool:
        return harness.ints(shape, dtype, 0, 1, salt, rank)
    lo = 0 if dtype == torch.uint8 else -8
    return harness.ints(shape, dtype, lo, 8, salt, rank)


def check_allreduce(ck, nl, gl, rank, world, dtype):
    for op in (ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX):
        for shape in SHAPES:
            x = reduce_inputs(op, shape, dtype, rank, ("ar", str(op), shape))

            def allreduce(g, t, op=op):
                dist.all_reduce(t, op=op, group=g)
                return t
            run_both(ck, "all_reduce %s %s %s" % (op, dtype, shape), nl, gl, allreduce, [x], dtype)
    # AVG: gloo has none; nlccl sums, then divides once (integers truncate toward zero).
    x = reduce_inputs(ReduceOp.SUM, (101,), dtype, rank, "avg")
    got, want = x.clone(), x.clone()
    dist.all_reduce(got, op=ReduceOp.AVG, group=nl)
    gloo_inplace(lambda t: dist.all_reduce(t, op=ReduceOp.SUM, group=gl), want)
    if dtype.is_floating_point:
        want = want / world
    else:
        want = torch.div(want, world, rounding_mode="trunc")
    ck.same("all_reduce AVG %s" % dtype, got, want)
    # A transposed (non-contiguous) tensor is reduced through a contiguous copy.
    x = reduce_inputs(ReduceOp.SUM, (6, 5), dtype, rank, "t").t()
    got, want = x.clone(), x.contiguous()
    dist.all_reduce(got, group=nl)
    gloo_inplace(lambda t: dist.all_reduce(t, group=gl), want)
    ck.same("all_reduce non-contiguous %s" % dtype, got, want)
    ck.true("all_reduce non-contiguous keeps strides", got.stride() == x.stride())
    # Random floats: bitwise at 2 ranks (a + b == b + a); at more, the orders of summation may
    # differ, by at most (world - 1) roundings of partial sums bounded by sum(|x|).
    if dtype in (torch.float32, torch.float64):
        x = torch.randn(4099, generator=harness.generator("randn", rank), dtype=dtype)
        got, want, mag = x.clone(), x.clone(), x.abs()
        dist.all_reduce(got, group=nl)
        dist.all_reduce(want, group=gl)
        if world == 2:
            ck.same("all_reduce randn %s" % dtype, got, want)
        else:
            dist.all_reduce(mag, group=gl)
            bound = (world - 1) * 2 * torch.finfo(dtype).eps * mag
            ck.true("all_reduce randn %s within rounding" % dtype,
                    bool(((got - want).abs() <= bound).all()),
                    "max error %g" % (got - want).abs().max().item())


def check_coalesced(ck, nl, gl, rank, dtype):
    xs = [reduce_inputs(ReduceOp.SUM, s, dtype, rank, ("co", s)) for s in SHAPES]

    def coalesced(g, *ts):
        ts = list(ts)
        dist.all_reduce_coalesced(ts, group=g)
        return ts
    run_both(ck, "all_reduce_coalesced %s" % dtype, nl, gl, coalesced, xs, dtype)


def check_broadcast_reduce(ck, nl, gl, rank, world, dtype):
    for root in range(world):
        x = harness.ints((37,), dtype, 0, 9, "bc", root, rank)

        def broadcast(g, t, root=root):
            dist.broadcast(t, src=root, group=g)
            return t
        run_both(ck, "broadcast root %d %s" % (root, dtype), nl, gl, broadcast, [x], dtype)
    for op in (ReduceOp.SUM, ReduceOp.MAX):
        root = world - 1
        x = reduce_inputs(op, (3001,), dtype, rank, ("red", str(op)))
        got, want = x.clone(), x.clone()
        dist.reduce(got, dst=root, op=op, group=nl)
        gloo_inplace(lambda t: dist.reduce(t, dst=root, op=op, group=gl), want)
        if rank == root:
            ck.same("reduce %s %s" % (op, dtype), got, want)
        else:
            ck.same("reduce leaves non-root input %s %s" % (op, dtype), got, x)


def check_gathers(ck, nl, gl, rank, world, dtype):
    x = harness.ints((5, 3), dtype, 0, 9, "ag", rank)

    def allgather(g, t):
        out = [torch.empty_like(t) for _ in range(world)]
        dist.all_gather(out, t, group=g)
        return out
    run_both(ck, "all_gather %s" % dtype, nl, gl, allgather, [x], dtype)
    got = torch.empty((world * 5, 3), dtype=dtype)
    dist.all_gather_into_tensor(got, x, group=nl)  # _allgather_base
    ck.same("all_gather_into_tensor %s" % dtype, got, torch.cat(gloo(allgather, gl, dtype, [x])))

    for op in (ReduceOp.SUM, ReduceOp.MIN):
        chunks = [reduce_inputs(op, (7,), dtype, rank, ("rs", str(op), j)) for j in range(world)]
        full = gloo_inplace(lambda t: dist.all_reduce(t, op=op, group=gl), torch.cat(chunks))
        want = full.view(world, 7)[rank].clone()
        got = torch.empty(7, dtype=dtype)
        dist.reduce_scatter(got, [c.clone() for c in chunks], op=op, group=nl)
        ck.same("reduce_scatter %s %s" % (op, dtype), got, want)
        got = torch.empty(7, dtype=dtype)
        dist.reduce_scatter_tensor(got, torch.cat(chunks), op=op, group=nl)  # _reduce_scatter_base
        ck.same("reduce_scatter_tensor %s %s" % (op, dtype), got, want)

    for root in (0, world - 1):
        x = harness.ints((11,), dtype, 0, 9, "ga", root, rank)

        def gather(g, t, root=root):
            out = [torch.empty_like(t) for _ in range(world)] if rank == root else None
            dist.gather(t, out, dst=root, group=g)
            return out if rank == root else [t]
        run_both(ck, "gather root %d %s" % (root, dtype), nl, gl, gather, [x], dtype)
        parts = [harness.ints((11,), dtype, 0, 9, "sc", root, j) for j in range(world)]

        def scatter(g, *parts, root=root):
            out = torch.empty_like(parts[0])
            dist.scatter(out, list(parts) if rank == root else None, src=root, group=g)
            return out
        run_both(ck, "scatter root %d %s" % (root, dtype), nl, gl, scatter, parts, dtype)


def rows(src, dst):
    """Rows rank src sends rank dst in the uneven all-to-alls (some are 0)."""
    return (2 * src + dst) % 3 + (1 if src == dst else 0)


def check_alltoall(ck, nl, gl, rank, world, dtype):
    x = harness.ints((world * 3, 2), dtype, 0, 99, "a2a", rank)

    def equal(g, t):
        out = torch.empty_like(t)
        dist.all_to_all_single(out, t, group=g)
        return out
    run_both(ck, "all_to_all_single equal %s" % dtype, nl, gl, equal, [x], dtype)

    ins = [rows(rank, j) for j in range(world)]
    outs = [rows(j, rank) for j in range(world)]
    x = harness.ints((sum(ins), 2), dtype, 0, 99, "a2av", rank)

    def uneven(g, t):
        out = torch.empty((sum(outs), 2), dtype=t.dtype)
        dist.all_to_all_single(out, t, output_split_sizes=outs, input_split_sizes=ins, group=g)
        return out
    run_both(ck, "all_to_all_single uneven %s" % dtype, nl, gl, uneven, [x], dtype)

    parts = list(x.split(ins))
    got = [torch.empty((n, 2), dtype=dtype) for n in outs]
    dist.all_to_all(got, [p.clone() for p in parts], group=nl)
    want = list(listed(gloo(uneven, gl, dtype, [x]))[0].split(outs))
    for j in range(world):
        ck.same("all_to_all list from %d %s" % (j, dtype), got[j], want[j])


def check_p2p(ck, nl, gl, rank, world, dtype):
    # A ring where every rank posts its send before its receive, then waits for the send first:
    # 8 MiB is more than the shared-memory FIFOs hold, so issuing the send alone would deadlock.
    n = (8 << 20) // torch.tensor([], dtype=dtype).element_size()
    nxt, prv = (rank + 1) % world, (rank - 1) % world

    def ring(g, send):
        recv = torch.empty_like(send)
        reqs = [dist.isend(send, nxt, group=g), dist.irecv(recv, prv, group=g)]
        for r in reqs:
            r.wait()
        return recv
    run_both(ck, "isend/irecv ring %s" % dtype, nl, gl, ring,
             [harness.ints((n,), dtype, 0, 99, "ring", rank)], dtype)
    # Several messages to one peer arrive in posting order (blocking receives on one side).
    if rank in (0, 1):
        peer = 1 - rank
        if rank == 0:
            reqs = [dist.isend(harness.ints((9,), dtype, 0, 9, "seq", i), peer, group=nl)
                    for i in range(3)]
            for r in reqs:
                r.wait()
        else:
            for i in range(3):
                t = torch.empty(9, dtype=dtype)
                dist.recv(t, peer, group=nl)
                ck.same("send order %d %s" % (i, dtype), t,
                        harness.ints((9,), dtype, 0, 9, "seq", i))


def worker(rank, world):
    harness.init(rank, world, "gloo")
    gl = dist.group.WORLD
    nl = harness.nlccl_group()
    ck = harness.Checks(rank)
    for dtype in DTYPES:
        check_allreduce(ck, nl, gl, rank, world, dtype)
        check_coalesced(ck, nl, gl, rank, dtype)
        check_broadcast_reduce(ck, nl, gl, rank, world, dtype)
        check_gathers(ck, nl, gl, rank, world, dtype)
        check_alltoall(ck, nl, gl, rank, world, dtype)
        check_p2p(ck, nl, gl, rank, world, dtype)
    for dtype in MORE_DTYPES:  # the other dtypes nlccl and torch share, where gloo has them
        x = reduce_inputs(ReduceOp.SUM, (37,), dtype, rank, "more")
        for op in (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN):
            got, want = x.clone(), x.clone()
            dist.all_reduce(got, op=op, group=nl)
            gloo_inplace(lambda t: dist.all_reduce(t, op=op, group=gl), want)
            ck.same("all_reduce %s %s" % (op, dtype), got, want)
        check_broadcast_reduce(ck, nl, gl, rank, world, dtype)
    if world >= 3:  # a subgroup: group ranks differ from global ranks
        sub = dist.new_group([0, 2], backend="nlccl",
                             timeout=harness.datetime.timedelta(seconds=30))
        if rank in (0, 2):
            t = torch.full((9,), float(rank + 1))
            dist.all_reduce(t, group=sub)
            ck.same("subgroup all_reduce", t, torch.full((9,), 4.0))
            b = torch.full((3,), float(rank))
            dist.broadcast(b, src=2, group=sub)  # src is a global rank
            ck.same("subgroup broadcast", b, torch.full((3,), 2.0))
            dist.destroy_process_group(sub)
    dist.barrier(group=nl)
    ck.finish()
    dist.destroy_process_group(nl)
    dist.destroy_process_group()


if __name__ == "__main__":
    harness.spawn(worker, int(sys.argv[1]))
