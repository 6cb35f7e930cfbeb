"""A rank killed (or stopped) mid-training: every other rank raises within the timeout given to
init_process_group instead of hanging, and exits.

    kill_test.py WORLD VICTIM TIMEOUT_S [kill|stop]

The ranks train a small DDP model on the "nlccl" default group; at step 10 the victim sends
itself SIGKILL (a dead peer, which nlccl notices at once) or SIGSTOP (a peer that stops
answering, which only the timeout reveals; the parent kills it at the end). The parent collects
what each survivor saw and fails if one hangs (is still running well after the timeout) or ends
without an exception.
"""
import multiprocessing
import os
import signal
import sys
import time

import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import harness

KILL_STEP = 10
STEPS = 1000  # far more than run before the kill


def worker(rank, world, victim, timeout_s, how, port, results):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    harness.init(rank, world, "nlccl", timeout_s=timeout_s)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 256), nn.Tanh(), nn.Linear(256, 1)).double(),
                bucket_cap_mb=0.05)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    try:
        for step in range(STEPS):
            if rank == victim and step == KILL_STEP:
                results.put((rank, "killed", "", time.monotonic()))
                os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGSTOP)
            x = torch.randn(64, 32, dtype=torch.float64)
            opt.zero_grad()
            nn.functional.mse_loss(model(x), x[:, :1]).backward()
            opt.step()
    except Exception as e:  # noqa: BLE001  (what the test is about)
        results.put((rank, "raised", "%s: %s" % (type(e).__name__, e), time.monotonic()))
        return
    results.put((rank, "finished", "", time.monotonic()))


def main(world, victim, timeout_s, how):
    ctx = multiprocessing.get_context("spawn")
    results = ctx.SimpleQueue()  # written at once: the victim dies right after its put
    port = harness.free_port()
    procs = [ctx.Process(target=worker, args=(r, world, victim, timeout_s, how, port, results))
             for r in range(world)]
    for p in procs:
        p.start()
    # No rank may still run once the timeout (plus start-up and teardown) has passed.
    deadline = time.monotonic() + 60 + 2 * timeout_s
    for r, p in enumerate(procs):
        if r != victim:
            p.join(max(0.0, deadline - time.monotonic()))
    if how == "stop":
        procs[victim].kill()
    procs[victim].join(max(1.0, deadline - time.monotonic()))
    hung = [r for r, p in enumerate(procs) if p.is_alive()]
    for r in hung:
        procs[r].kill()
    seen = {}
    while not results.empty():
        rank, what, detail, t = results.get()
        seen[rank] = (what, detail, t)
    failures = ["rank %d hangs" % r for r in hung]
    if seen.get(victim, ("",))[0] != "killed" or procs[victim].exitcode != -signal.SIGKILL:
        failures.append("the victim (rank %d) was not killed at step %d: %s, exit code %s" % (
            victim, KILL_STEP, seen.get(victim), procs[victim].exitcode))
    killed_at = seen.get(victim, ("", "", 0.0))[2]
    for r in range(world):
        if r == victim or r in hung:
            continue
        what, detail, t = seen.get(r, ("nothing", "", 0.0))
        if what != "raised":
            failures.append("rank %d %s instead of raising (exit code %s)" % (
                r, what, procs[r].exitcode))
            continue
        after = t - killed_at
        print("rank %d raised %.1f s after the victim's %s: %s" % (
            r, after, "death" if how == "kill" else "stop", detail[:200]), flush=True)
        if "nlccl" not in detail:
            failures.append("rank %d raised an error that does not come from nlccl: %s" % (
                r, detail))
        if after > timeout_s + 10:  # generous: the timeout is the bound, 10 s for a busy host
            failures.append("rank %d raised %.1f s after the victim went, beyond the %d s timeout" % (
                r, after, timeout_s))
    if failures:
        sys.exit("FAILED:\n  " + "\n  ".join(failures))
    print("every survivor of %d ranks raised; none hangs" % world)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
         sys.argv[4] if len(sys.argv) > 4 else "kill")
