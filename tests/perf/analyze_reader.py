#!/usr/bin/env python3
"""The reading logic of nccl-tests' tools/analyze_perf_json.py, written here: what it loads from a
-J file (with -I 1) and the checks it makes. Fails when nlccl-perf's JSON would not be readable by
it, or its per-iteration rows are inconsistent.

usage: analyze_reader.py <file.json> <nranks> <ranks-per-process>
"""
import json, sys

path, nranks, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path) as f:
    data = json.load(f)
fail = []
if data.get("version") != 2:
    fail.append("version %r, want 2" % data.get("version"))
cfg = data.get("config", {})
for key in ("iterations", "aggregated_iterations"):
    if not isinstance(cfg.get(key), int):
        fail.append("config.%s missing" % key)
devices = cfg.get("devices", [])
if len(devices) != nranks or not all("hostname" in d for d in devices):
    fail.append("config.devices: %d entries with hostnames, want %d" % (len(devices), nranks))
results = data.get("results", [])
if not results:
    fail.append("no results")
nprocs = nranks // per
for r in results:
    if not isinstance(r.get("size"), int):
        fail.append("a result without an integer size")
        break
    for placement in ("out_of_place", "in_place"):
        per_iter = r.get(placement + "_per_iter")
        if not per_iter:
            fail.append("%s: no %s_per_iter" % (r["size"], placement))
            continue
        for key in ("min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us", "stdev_us",
                    "cv_pct", "times_us"):
            if key not in per_iter:
                fail.append("%s_per_iter.%s missing" % (placement, key))
        times = per_iter.get("times_us", [])
        if len(times) != cfg.get("iterations"):
            fail.append("%d times for %r iterations" % (len(times), cfg.get("iterations")))
        rows = per_iter.get("per_process_max_times_us", [])
        if nprocs > 1 and len(rows) != nprocs:
            fail.append("%d process rows, want %d" % (len(rows), nprocs))
        # The analyzer's consistency check: times_us is the max over process rows.
        if rows:
            n = min(len(t) for t in rows)
            expected = [max(t[i] for t in rows) for i in range(n)]
            if len(times) != len(expected) or any(abs(a - b) >= 0.001 for a, b in zip(times, expected)):
                fail.append("times_us is not the max over process rows at size %s" % r["size"])
        # Its spike ratio divides by avg_us, and its table reads these as numbers.
        if not (per_iter.get("avg_us", 0) > 0 and per_iter["max_us"] >= per_iter["min_us"]):
            fail.append("per-iteration stats out of order at size %s" % r["size"])
    for placement in ("out_of_place", "in_place"):
        half = r.get(placement, {})
        if not all(k in half for k in ("time", "alg_bw", "bus_bw", "nwrong")):
            fail.append("%s lacks time/alg_bw/bus_bw/nwrong" % placement)
if "out_of_bounds" not in data or "average_bus_bandwidth" not in data:
    fail.append("no out_of_bounds / average_bus_bandwidth")
if fail:
    print("FAIL:\n  " + "\n  ".join(fail))
    sys.exit(1)
print("Consistency (times_us == max over process rows): PASS; %d results read" % len(results))
