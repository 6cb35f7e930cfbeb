#!/usr/bin/env python3
"""Every documented nlccl-perf flag applied in a real run: a table of (flags, what the output
must show). Ranks are threads (-t 2) unless a case says otherwise; sizes stay small.

usage: flags_check.py <nlccl-perf>
"""
import json, os, subprocess, sys, tempfile

perf = sys.argv[1]
tmp = tempfile.mkdtemp()
base = ["-b", "1K", "-e", "4K", "-f", "4", "-n", "3", "-w", "1"]


def rows(out):
    return [l.split() for l in out.splitlines() if l.strip() and not l.startswith("#")
            and not l.startswith("nRanks")]


def header(out, prefix):
    return next((l for l in out.splitlines() if l.startswith(prefix)), "")


def ok_rows(out, fields=13):
    r = rows(out)
    return bool(r) and all(len(x) >= fields and x[8] == "0" and x[12] == "0" for x in r)


def json_of(path):
    with open(path) as f:
        return json.load(f)


J = os.path.join(tmp, "r.json")
CASES = [
    # (name, collective, flags, check(stdout, returncode))
    ("-t", "allreduce", ["-t", "3"], lambda o, rc: rc == 0 and "nThread 3 nGpus 1" in o
     and o.count("#  Rank ") == 3 and ok_rows(o)),
    ("-g", "allreduce", ["-t", "1", "-g", "3"], lambda o, rc: rc == 0 and "nThread 1 nGpus 3" in o
     and o.count("#  Rank ") == 3 and ok_rows(o)),
    ("-b -e -f", "allgather", ["-b", "64", "-e", "4096", "-f", "8"],
     lambda o, rc: [r[0] for r in rows(o)] == ["64", "512", "4096"]),
    ("-i", "allreduce", ["-b", "1K", "-e", "3K", "-i", "1K", "-f", "1"],
     lambda o, rc: [r[0] for r in rows(o)] == ["1024", "2048", "3072"]),
    ("-o", "allreduce", ["-o", "mulsum"], lambda o, rc: rc == 0 and ok_rows(o)
     and all(r[3] == "mulsum" for r in rows(o))),
    ("-o all", "reducescatter", ["-o", "all"], lambda o, rc: rc == 0 and ok_rows(o)
     and {r[3] for r in rows(o)} == {"sum", "prod", "max", "min", "avg", "mulsum"}),
    ("-d", "allreduce", ["-d", "half"], lambda o, rc: ok_rows(o) and all(r[2] == "half" for r in rows(o))),
    ("-r", "gather", ["-t", "3", "-r", "all"], lambda o, rc: ok_rows(o)
     and {r[4] for r in rows(o)} == {"0", "1", "2"}),
    ("-n -w", "allreduce", ["-n", "4", "-w", "2"], lambda o, rc: "warmup iters: 2 iters: 4" in o),
    ("-m", "allreduce", ["-m", "3"], lambda o, rc: "agg iters: 3" in o and ok_rows(o)),
    ("-a", "allreduce", ["-a", "3"], lambda o, rc: rc == 0 and ok_rows(o)),
    ("-a 0", "allreduce", ["-a", "0"], lambda o, rc: rc == 0 and ok_rows(o)),
    ("-N", "allreduce", ["-N", "2"], lambda o, rc: [r[0] for r in rows(o)] == ["1024", "4096"] * 2),
    ("-p", "allreduce", ["-t", "3", "-p", "1"], lambda o, rc: "Parallel Init Enabled" in o and ok_rows(o)),
    ("-c", "allreduce", ["-c", "3", "--corrupt-result", "0"],
     lambda o, rc: rc == 1 and all(r[8] == "3" and r[12] == "3" for r in rows(o))),
    ("-c 0", "allreduce", ["-c", "0"], lambda o, rc: rc == 0 and all(r[8] == "N/A" for r in rows(o))),
    ("-z 1", "allreduce", ["-z", "1"], lambda o, rc: "barrier after each collective" in o and ok_rows(o)),
    ("-z 2", "allreduce", ["-z", "2"], lambda o, rc: "(no barrier)" in o and ok_rows(o)),
    ("-Z 1", "allreduce", ["-Z", "1", "-c", "2"], lambda o, rc: rc == 0 and "# NULL Stream" in o
     and ok_rows(o)),
    ("-Z 1 sendrecv", "sendrecv", ["-Z", "1"], lambda o, rc: rc == 0 and ok_rows(o)),
    ("-G", "allreduce", ["-G", "1"], lambda o, rc: rc == 2),
    ("-G 0", "allreduce", ["-G", "0"], lambda o, rc: rc == 0 and "graph: 0" in o),
    ("-C", "allreduce", ["-C", "1"], lambda o, rc: "cputime" in header(o, "#       size")),
    ("-T", "allreduce", ["-T", "60"], lambda o, rc: rc == 0 and "Timeout: 60 s" in o),
    ("-R 1", "allgather", ["-R", "1"], lambda o, rc: rc == 0 and ok_rows(o)),
    ("-R 2", "alltoall", ["-R", "2"], lambda o, rc: rc == 0 and ok_rows(o)),
    ("-S", "allreduce", ["-S", "1"], lambda o, rc: all(len(r) == 15 and r[13].count("-") == 2
                                                        for r in rows(o))),
    ("-u", "alltoallv", ["-u", "3", "-d", "int8"], lambda o, rc: "unalign: 3" in o and ok_rows(o)),
    ("-x", "allreduce", ["-x", "1"], lambda o, rc: rc == 0 and ok_rows(o)),
    ("-D", "allreduce", ["-D", "1"], lambda o, rc: rc == 2),
    ("-V", "allreduce", ["-V", "32"], lambda o, rc: rc == 0),
    ("-M", "allreduce", ["-M", "1"], lambda o, rc: "# Host memory usage" in o),
    ("-I -K", "allreduce", ["-I", "1", "-K", "1"], lambda o, rc: "i_p99" in o
     and all(len(r) == 21 for r in rows(o))),
    ("-J", "allreduce", ["-J", J], lambda o, rc: rc == 0 and json_of(J)["version"] == 2
     and len(json_of(J)["results"]) == 2),
    ("-J exists", "allreduce", ["-J", J], lambda o, rc: rc == 0 and os.path.exists(J + ".0")),
    ("-np", "allreduce", ["-np", "2", "-g", "2"], lambda o, rc: rc == 0 and o.count("#  Rank ") == 8
     and ok_rows(o)),
    ("hypercube", "hypercube", ["-t", "4"], lambda o, rc: rc == 0 and ok_rows(o)),
    ("scatter", "scatter", ["-t", "3", "-r", "1"], lambda o, rc: rc == 0 and ok_rows(o)),
]

failed = 0
for name, coll, flags, check in CASES:
    cmd = [perf, coll, "-t", "2"] + base + flags
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    good = False
    try:
        good = check(p.stdout, p.returncode)
    except Exception as e:  # a check that throws has failed
        print("  exception:", e)
    print(("ok    " if good else "FAIL  ") + name + ": " + " ".join(cmd[1:]))
    if not good:
        failed += 1
        print(p.stdout[-2000:])
        print(p.stderr[-2000:])
# -w also warms up before the sweep, as nccl-tests does: the largest size, then the smallest,
# before the first size's own warm-up (rank 0's collectives in order, the barriers' left out).
env = dict(os.environ, NLCCL_DEBUG="INFO", NLCCL_DEBUG_SUBSYS="COLL")
cmd = [perf, "allreduce", "-t", "2", "-b", "1K", "-e", "4K", "-f", "4", "-n", "1", "-w", "2"]
p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
counts = [l.split("count ")[1].split(",")[0] for l in (p.stdout + p.stderr).splitlines()
          if "allreduce: rank 0 of 2, count " in l and "float" in l]
good = counts[:6] == ["1024", "1024", "256", "256", "256", "256"]
print(("ok    " if good else "FAIL  ") + "-w before the sweep: " + " ".join(cmd[1:]))
if not good:
    failed += 1
    print("rank 0's float all-reduce counts:", counts[:12])
print("%d of %d flag cases applied" % (len(CASES) + 1 - failed, len(CASES) + 1))
sys.exit(1 if failed else 0)
