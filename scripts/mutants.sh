#!/usr/bin/env bash
# Planted bugs the test suite must catch (DESIGN.md section 9: "a test must be able to fail").
#
# Copies the tree (tracked and untracked, not ignored, files) into a scratch directory, builds the
# test binaries the mutants need there once, checks that their tests pass unmutated, then for each
# mutant: replaces one exact piece of code (it must occur exactly once, so a refactoring that
# moves the code makes the mutant fail loudly instead of silently testing nothing), rebuilds only
# its test binaries, runs its tests, and restores the file. A mutant is killed when a test fails;
# the script fails if any mutant survives or no longer applies. The scratch directory is kept, so
# a second run rebuilds only what changed.
#
#   scripts/mutants.sh              every mutant
#   scripts/mutants.sh NAME...      the named ones
#   scripts/mutants.sh --list       names, layers and tests
#
# NLCCL_MUTANTS_DIR picks the scratch directory (default build-mutants/ in the tree; ctest's
# "mutants" test, label slow, uses <build>/mutants). MUTANTS_JOBS (default 2) is ninja's and
# ctest's -j. Collectives that a mutant breaks must fail, not hang: NLCCL_TIMEOUT_MS is 20 s here.
#
# Adding a mutant: one `mutant` call below, with a name, the layer, the file, the exact text to
# replace (use $'...' for several lines), its replacement, the build targets of the tests that
# should kill it, and a ctest -R regex selecting those tests. Run `scripts/mutants.sh NAME`: it
# must report KILLED. Pick the smallest change a real bug could be, and the tests that are meant
# to catch that kind of bug (not whatever happens to fail).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=${NLCCL_MUTANTS_DIR:-$root/build-mutants}
jobs=${MUTANTS_JOBS:-2}
tree=$scratch/tree
build=$scratch/build

names=() layers=() files=() olds=() news=() targets=() tests=()
# mutant NAME LAYER FILE OLD NEW "TARGET..." CTEST_REGEX
mutant() {
  names+=("$1") layers+=("$2") files+=("$3") olds+=("$4") news+=("$5") targets+=("$6") tests+=("$7")
}

# ---- the mutants: one per layer, and the ones issue 19 named ----

mutant api-broadcast-root-only-swapped "argument check (src/api)" src/api/collectives.cpp \
  'stream, "nlcclBroadcast", 1, false, true, Where::RootOnly, Where::All);' \
  'stream, "nlcclBroadcast", 1, false, true, Where::All, Where::RootOnly);' \
  api_contract_test '^(EveryEntryPoint/)?Contract\.'

mutant kernel-e4m3-sum-is-zero "kernel (src/kernels)" src/kernels/reduce.cpp \
  'return C::encode(C::decode(a) + C::decode(b));' \
  'return std::is_same_v<C, E4m3> ? C::encode(0.0f) : C::encode(C::decode(a) + C::decode(b));' \
  multirank_collectives_test '^Loopback/CollectivesTest\.'

mutant kernel-e5m2-ties-round-down "kernel rounding (src/kernels)" src/kernels/reduce.cpp \
  'return C::encode(C::decode(a) + C::decode(b));' \
  'return C::encode(std::is_same_v<C, E5m2> ? std::nextafter(C::decode(a) + C::decode(b), 0.0f) : C::decode(a) + C::decode(b));' \
  multirank_collectives_test '^Loopback/CollectivesTest\.'

mutant plan-ring-allgather-drops-last-step "Plan builder (algorithms)" algorithms/patterns.cpp \
  $'    for (int s = 0; s + 1 < m; ++s) {\n      const Region mine = blk(i, i)' \
  $'    for (int s = 0; s + 2 < m; ++s) {\n      const Region mine = blk(i, i)' \
  plan_test '^(Verifier|RingCost|DirectCost|Patterns|Registry)[./]'

mutant engine-fifo-matching-reversed "engine matching (src/plan/compiled.cpp)" src/plan/compiled.cpp \
  'const End& r = recvs_[j + m];' \
  'const End& r = recvs_[j1 - 1 - m];' \
  multirank_collectives_test '^Loopback/CollectivesTest\.AllTypesAndOps/(allreduce|allgather|reducescatter)_'

mutant shm-recv-completes-at-first-fragment "transport completion (transports/shm)" transports/shm/shm.cpp \
  '    if (p.curNext == p.curTotal) {' \
  '    if (p.curNext == p.curTotal || p.cur == Target::Recv) {' \
  multirank_shm_transport_test '^ShmTransport\.(Exchange2RanksDefaultSlots|ReduceOnArrival2Ranks)$'

mutant shm-ll-ignores-message-order "transport ordering (transports/shm LL)" transports/shm/shm_ll.cpp \
  '    if (p.cur != Target::None || h.seq != p.recvSeq) break;' \
  '    if (p.cur != Target::None) break;' \
  multirank_shm_ll_test '^ShmLL\.SameTag'

mutant sim-latency-halved "simulator cost (src/sim)" src/sim/executor.cpp \
  'queue_.push({t + xfers_[x].latency, 1, k, x});' \
  'queue_.push({t + 0.5 * xfers_[x].latency, 1, k, x});' \
  "sim_flow_test sim_formula_test" '^(SimFlow|Flat/Formula|SimUs144)\.'

mutant flow-freezes-above-departures "flow solver (src/fabric)" src/fabric/flow_network.cpp \
  '      thetaLeft_ = std::min(thetaLeft_, rate_[f]);' \
  '      thetaLeft_ = std::min(thetaLeft_, 2 * rate_[f]);' \
  sim_network_test '^SimNetwork\.'

mutant flow-settle-trusts-expanded "flow solver (src/fabric)" src/fabric/flow_network.cpp \
  '      if (expanded_[r] == epoch_ && outsideTop_[r] <= above) continue;' \
  '      if (expanded_[r] == epoch_) continue;' \
  sim_network_test '^SimNetwork\.'

mutant sim-oversubscribed-uplink-passive "simulator passive links (src/sim)" src/sim/executor.cpp \
  '    passiveLink_[l] = std::min(outSum[l], inSum[l]) <= link.bwBps * (1 + 1e-12);' \
  '    passiveLink_[l] = std::max(outSum[l], inSum[l]) <= 2 * link.bwBps;' \
  sim_flow_test '^SimFlow\.Uplinks'

mutant memfree-keeps-its-descriptor "shared memory (src/util)" src/util/shared_memory.cpp \
  '  close(e.fd);' \
  '  (void)e.fd;' \
  multirank_memalloc_test '^MemAlloc\.'

mutant departed-owner-is-system-error "shared memory (src/util)" src/util/shared_memory.cpp \
  'if (!localShortage(err) && ownerHolds(pid, fd, token) == Held::No) {' \
  'if (!localShortage(err) && ownerHolds(pid, fd, token) == Held::Unknown) {' \
  "shared_memory_test multirank_shm_transport_test" '^(RemoteMapping\.|ShmTransport\.PeerThatGaveUp)'

mutant aborted-work-is-invalid-usage "streams (src/core)" src/core/work.cpp \
  $'WARN("rank %d: communicator was aborted", c->rank());\n      return Status::RemoteError;' \
  $'WARN("rank %d: communicator was aborted", c->rank());\n      return Status::InvalidUsage;' \
  multirank_streams_test '^(StreamsTest\.Abort|Abort\.)'

mutant check-ignores-op "NLCCL_CHECK (src/core)" src/core/collective.cpp \
  '    check.sig.op = static_cast<int32_t>(a.op);' \
  '    check.sig.op = 0;' \
  multirank_streams_test '^CheckTest\.'

mutant scratch-lease-leaks-after-pool "scratch pool (src/core)" src/core/scratch_pool.cpp \
  'if (auto pl = pool.lock()) pl->giveBack(std::move(*holder));' \
  'if (auto pl = pool.lock()) pl->giveBack(std::move(*holder)); else (void)holder->data.release();' \
  scratch_pool_test '^ScratchPoolTest\.'

# ---- driver ----

if [ "${1:-}" = "--list" ]; then
  for i in "${!names[@]}"; do
    printf '%-38s %-42s %s: %s\n' "${names[$i]}" "${layers[$i]}" "${targets[$i]}" "${tests[$i]}"
  done
  exit 0
fi
selected=()
if [ $# -eq 0 ]; then
  selected=("${!names[@]}")
else
  for want in "$@"; do
    found=
    for i in "${!names[@]}"; do [ "${names[$i]}" = "$want" ] && selected+=("$i") && found=1; done
    [ -n "$found" ] || { echo "mutants.sh: no mutant named $want (see --list)" >&2; exit 2; }
  done
fi

t0=$(date +%s)
mkdir -p "$tree" "$build"
# Sync the copy: changed files get a fresh mtime (so ninja rebuilds them, also after a mutant),
# unchanged ones keep theirs; files gone from the tree go from the copy.
python3 - "$root" "$tree" <<'PY'
import filecmp, os, shutil, subprocess, sys
root, tree = sys.argv[1], sys.argv[2]
try:
    out = subprocess.run(["git", "-C", root, "ls-files", "-z", "-co", "--exclude-standard"],
                         check=True, capture_output=True).stdout.decode()
    files = {f for f in out.split("\0") if f and os.path.isfile(os.path.join(root, f))}
except (OSError, subprocess.CalledProcessError):
    files = set()
    for d, subdirs, names in os.walk(root):
        rel = os.path.relpath(d, root)
        subdirs[:] = [s for s in subdirs if not (rel == "." and (s.startswith("build") or s == ".git"))]
        files |= {os.path.normpath(os.path.join(rel, n)) for n in names}
# Never copy a build directory (one with a CMakeCache.txt) or the scratch directory itself.
skip = [os.path.relpath(tree, root) + os.sep]
for f in files:
    if os.path.basename(f) == "CMakeCache.txt":
        skip.append(os.path.dirname(f) + os.sep)
files = {f for f in files if not any(f.startswith(s) for s in skip if not s.startswith(".."))}
for f in files:
    src, dst = os.path.join(root, f), os.path.join(tree, f)
    if not os.path.exists(dst) or not filecmp.cmp(src, dst, shallow=False):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(src, dst)
        shutil.copymode(src, dst)
for d, _, names in os.walk(tree):
    for n in names:
        rel = os.path.relpath(os.path.join(d, n), tree)
        if rel not in files:
            os.remove(os.path.join(d, n))
PY

if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$tree" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNLCCL_BUILD_BENCH=OFF \
    -DNLCCL_WITH_TORCH=OFF -DNLCCL_WITH_MPI=OFF >"$scratch/configure.log" 2>&1 ||
    { cat "$scratch/configure.log" >&2; exit 1; }
fi

all_targets=() all_tests=()
for i in "${selected[@]}"; do
  read -r -a ts <<<"${targets[$i]}"
  all_targets+=("${ts[@]}")
  all_tests+=("${tests[$i]}")
done
regex_union=$(IFS='|'; echo "${all_tests[*]}")

export NLCCL_TIMEOUT_MS=20000 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run_tests() {  # run_tests REGEX LOG: ctest's status
  ctest --test-dir "$build" -R "$1" -j "$jobs" --timeout 300 --no-tests=error \
    --output-on-failure >"$2" 2>&1
}

echo "mutants: building ${all_targets[*]} in $build"
cmake --build "$build" -j "$jobs" --target "${all_targets[@]}" >"$scratch/build.log" 2>&1 ||
  { tail -40 "$scratch/build.log" >&2; echo "mutants: the unmutated tree does not build" >&2; exit 1; }
echo "mutants: the unmutated tree must pass the mutants' tests"
if ! run_tests "$regex_union" "$scratch/baseline.log"; then
  grep -A20 "tests FAILED" "$scratch/baseline.log" >&2 || tail -20 "$scratch/baseline.log" >&2
  echo "mutants: the unmutated tree fails these tests; fix that first" >&2
  exit 1
fi
echo "mutants: baseline passes ($(grep -oE 'out of [0-9]+' "$scratch/baseline.log" | cut -d' ' -f3 || true)" \
  "tests, $(( $(date +%s) - t0 )) s so far)"

killed=0 survived=0 broken=0
report=()
for i in "${selected[@]}"; do
  name=${names[$i]} file=${files[$i]}
  m0=$(date +%s)
  log=$scratch/$name.log
  original=$(mktemp)
  cp "$tree/$file" "$original"
  if ! python3 - "$tree/$file" "${olds[$i]}" "${news[$i]}" <<'PY'
import sys
path, old, new = sys.argv[1:4]
text = open(path).read()
n = text.count(old)
if n != 1:
    sys.exit(f"{path}: the text to mutate occurs {n} times (want exactly once)")
open(path, "w").write(text.replace(old, new))
PY
  then
    result="BROKEN (no longer applies: update the mutant)"
    broken=$((broken + 1))
  else
    read -r -a ts <<<"${targets[$i]}"
    if ! cmake --build "$build" -j "$jobs" --target "${ts[@]}" >"$log" 2>&1; then
      result="BROKEN (does not compile: see $log)"
      broken=$((broken + 1))
    elif run_tests "${tests[$i]}" "$log.tests"; then
      result="SURVIVED (every test of ${tests[$i]} passed)"
      survived=$((survived + 1))
    else
      failed=$(sed -n '/tests FAILED:/,$p' "$log.tests" |
               sed -nE 's/^[[:space:]]+[0-9]+ - ([^ ]+).*/\1/p' || true)
      n=$(printf '%s\n' "$failed" | grep -c . || true)
      by=$(printf '%s\n' "$failed" | head -3 | paste -sd, - || true)
      [ "$n" -gt 3 ] && by="$by, ..."
      result="KILLED by $n test(s): $by"
      killed=$((killed + 1))
    fi
  fi
  # Restore with a fresh mtime: ninja then rebuilds what the mutant compiled.
  cat "$original" >"$tree/$file"
  rm -f "$original"
  line=$(printf '%-38s %-42s %4ss  %s' "$name" "${layers[$i]}" "$(( $(date +%s) - m0 ))" "$result")
  echo "$line"
  report+=("$line")
done
# Leave the scratch build unmutated for the next run.
cmake --build "$build" -j "$jobs" --target "${all_targets[@]}" >"$scratch/build.log" 2>&1 || true

echo
echo "mutants: $killed killed, $survived survived, $broken broken, $(( $(date +%s) - t0 )) s in all"
[ "$survived" -eq 0 ] && [ "$broken" -eq 0 ]
