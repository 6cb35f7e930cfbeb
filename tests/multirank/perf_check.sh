#!/usr/bin/env bash
# Runs nlccl-perf and asserts its table is complete and every #wrong is 0.
#   perf_check.sh threads|fork|mpi <nlccl-perf> <nranks> <collective> [nlccl-perf flags...]
#   perf_check.sh badflag <nlccl-perf>   (a bad flag must exit 2 and name the flag)
# With --compare-mpi among the flags it also checks the two MPI columns (mpi time, ratio) and
# their JSON fields.
set -u
mode=$1 perf=$2
shift 2
out=$(mktemp) err=$(mktemp) json=$(mktemp -u --suffix=.json)
# mpirun's session directory of its own: two launches at once (ctest -j) race to create
# /tmp/ompi.<host>.<uid> and one fails with "File exists".
session=$(mktemp -d)
trap 'rm -rf "$out" "$err" "$json" "$session"' EXIT

if [[ $mode == badflag ]]; then
  "$perf" allreduce -b 8 -q 3 >"$out" 2>"$err"
  rc=$?
  [[ $rc == 2 ]] || { echo "bad flag: exit $rc, want 2"; cat "$err"; exit 1; }
  grep -q -- "-q" "$err" || { echo "bad flag: message does not name -q:"; cat "$err"; exit 1; }
  "$perf" allreduce -b 1X >"$out" 2>"$err"
  rc=$?
  [[ $rc == 2 ]] && grep -q -- "-b" "$err" || { echo "bad size: exit $rc"; cat "$err"; exit 1; }
  "$perf" nosuchcoll >"$out" 2>"$err"
  [[ $? == 2 ]] || { echo "bad collective accepted"; exit 1; }
  # --compare-mpi needs mpirun: standalone (and with -np) it must fail and name the flag.
  for extra in "" "-np 2"; do
    "$perf" allreduce -b 8 -e 8 $extra --compare-mpi >"$out" 2>"$err"
    rc=$?
    [[ $rc == 2 ]] && grep -q -- "--compare-mpi" "$err" ||
      { echo "--compare-mpi without mpirun ($extra): exit $rc"; cat "$err"; exit 1; }
  done
  echo "bad flags refused"
  exit 0
fi

nranks=$1 coll=$2
shift 2
case $mode in
  threads) cmd=("$perf" "$coll" -t "$nranks" --json "$json" "$@") ;;
  fork) cmd=("$perf" "$coll" -np "$nranks" --json "$json" "$@") ;;
  mpi)
    root=()
    [[ $(id -u) == 0 ]] && root=(--allow-run-as-root)
    # Loopback only: Open MPI's TCP pieces stay on lo. PERF_CHECK_MPI_BTL picks MPI's own
    # transports (self,tcp to compare with nlccl over ofi/tcp).
    cmd=(mpirun "${root[@]}" --oversubscribe --mca orte_tmpdir_base "$session"
         --mca btl "${PERF_CHECK_MPI_BTL:-self,vader}"
         --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo
         -np "$nranks" "$perf" "$coll" --json "$json" "$@") ;;
  *) echo "unknown mode $mode"; exit 1 ;;
esac
echo "+ ${cmd[*]}"
timeout 150 "${cmd[@]}" >"$out" 2>"$err"
rc=$?
cat "$out"
[[ -s $err ]] && { echo "--- stderr"; head -50 "$err"; }
[[ $rc == 0 ]] || { echo "FAIL: nlccl-perf exited $rc"; exit 1; }

compare=0
for a in "$@"; do [[ $a == --compare-mpi ]] && compare=1; done

python3 - "$out" "$json" "$nranks" "$coll" "$compare" "$mode" <<'PY'
import json, math, re, sys
out, jpath, nranks, coll = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
compare, mode = sys.argv[5] == "1", sys.argv[6]
nfields = 15 if compare else 13
text = open(out).read().splitlines()
rows = [l.split() for l in text if l.strip() and not l.startswith("#")]
fail = []
if not rows:
    fail.append("no result rows")
for r in rows:
    if len(r) != nfields:
        fail.append("row with %d fields, want %d: %s" % (len(r), nfields, " ".join(r)))
    elif r[8] != "0" or r[12] != "0":
        fail.append("wrong results: " + " ".join(r))
    elif compare:
        # mpi time > 0, and ratio = out-of-place time / mpi time (to the printed rounding).
        try:
            t, mt, ratio = float(r[5]), float(r[13]), float(r[14])
        except ValueError:
            fail.append("mpi columns do not parse: " + " ".join(r))
            continue
        # A ratio below 0.005 prints as 0.00 (MPI had a slow moment): only its rounding is checked.
        if not (mt > 0 and ratio >= 0 and math.isclose(ratio, t / mt, rel_tol=0.05, abs_tol=0.006)):
            fail.append("mpi time %g, ratio %g, want %g: %s" % (mt, ratio, t / mt, " ".join(r)))
if not any(l.startswith("# Out of bounds values : 0 OK") for l in text):
    fail.append("missing '# Out of bounds values : 0 OK'")
if not any(l.startswith("# Avg bus bandwidth    : ") for l in text):
    fail.append("missing '# Avg bus bandwidth' footer")
if not any("size" in l and "#wrong" in l for l in text if l.startswith("#")):
    fail.append("missing column header")
if compare and not any("mpi time" in l and "ratio" in l for l in text if l.startswith("#")):
    fail.append("missing 'mpi time' and 'ratio' column titles")
if compare and not any(l.startswith("# Avg ratio to MPI") for l in text):
    fail.append("missing '# Avg ratio to MPI' footer")
# Under mpirun, ranks 0 and 1 share this host: the cache-line latency between them, before and
# after the table (positive, and the same before in the JSON).
lat = [float(m.group(2)) for l in text
       for m in [re.match(r"# Shared-memory latency( after the run)?, ranks 0 <-> 1: ([0-9.]+) ns", l)]
       if m]
if mode == "mpi" and nranks >= 2 and not (len(lat) == 2 and all(x > 0 for x in lat)):
    fail.append("want the shared-memory latency before and after the table, got %r" % lat)
ranks = [l for l in text if l.startswith("#  Rank ")]
if len(ranks) != nranks:
    fail.append("%d rank lines, want %d" % (len(ranks), nranks))
doc = json.load(open(jpath))  # nccl-tests' JSON (version 2), one record per row
res = doc["results"]
if doc.get("version") != 2 or "config" not in doc:
    fail.append("json is not nccl-tests' version 2 document")
elif lat and not math.isclose(doc["config"].get("shm_latency_ns", -1), lat[0], abs_tol=0.5):
    fail.append("json shm_latency_ns %r, header %r" % (doc["config"].get("shm_latency_ns"), lat[0]))
if len(res) != len(rows):
    fail.append("json has %d records for %d rows" % (len(res), len(rows)))
for rec in res:
    ext = rec.get("nlccl", {})
    if (rec["out_of_place"]["nwrong"] != 0 or rec["in_place"]["nwrong"] != 0 or
            ext.get("ranks") != nranks or ext.get("collective") != coll):
        fail.append("json record: %r" % rec)
        break
    if compare:
        m = ext.get("mpi", {})
        mt, ratio = m.get("time"), m.get("ratio")
        if not (isinstance(mt, float) and mt > 0 and isinstance(ratio, float) and
                math.isclose(ratio, rec["out_of_place"]["time"] / mt, rel_tol=1e-6)):
            fail.append("json record without MPI time and ratio: %r" % rec)
            break
if fail:
    print("FAIL:\n  " + "\n  ".join(fail))
    sys.exit(1)
print("OK: %d rows, every #wrong is 0" % len(rows))
PY
