#!/usr/bin/env bash
# Runs nlccl-perf over the simulated NeuronLink transport and checks the modelled columns: every
# row has modelled time and busbw for both halves, the time never falls below the fabric latency
# times the ring's 2(p-1) steps at sizes where every chunk is non-empty, and #wrong is 0.
set -euo pipefail
bin=$1
ranks=4
out=$(NLCCL_TRANSPORT=neuronlink NLCCL_NEURONLINK_REALTIME=0 NLCCL_ALGO=ring \
      "$bin" allreduce -t $ranks -b 1K -e 1M -f 32 -n 2 -w 1)
echo "$out"
echo "$out" | python3 -c '
import sys
ranks = 4
lines = sys.stdin.read().splitlines()
assert any("mtime" in l and "mbusbw" in l for l in lines), "no modelled columns in the header"
rows = [l.split() for l in lines if l and not l.startswith("#")]
assert rows, "no rows"
for f in rows:
    assert len(f) == 17, f"expected 17 fields, got {len(f)}: {f}"
    assert f[8] == "0" and f[12] == "0", f"wrong results: {f}"
    for t in (float(f[13]), float(f[15])):
        # 10 us per step on trn3-us144, 2(p-1) ring steps
        assert t >= 2 * (ranks - 1) * 10.0 - 1e-6, f"modelled time {t} below the latency bound"
    assert float(f[14]) > 0 and float(f[16]) > 0, f"no modelled busbw: {f}"
print(f"perf model check: {len(rows)} passed, 0 failed")
'
