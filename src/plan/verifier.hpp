// The plan verifier (DESIGN.md 2.1): executes a Plan symbolically and proves it computes its
// collective.
//
// Every element of every buffer of every rank holds "element i of the ranks in set S" (or nothing,
// before it is first written). Inputs start as {i, {rank}}; a copy moves a value, a reduction
// unites two values of the same element with disjoint rank sets (RecvReduceCopy: the region takes
// its `src` operand, which must be initialised, united with the incoming value; `src` is read by
// the step, concurrently with its other transfers, and may equal the region but not partially
// overlap it). The verifier runs all ranks' channels under the rules of plan.hpp with rendezvous
// semantics (a send completes only once the peer has posted the matching receive, so a Plan that
// passes cannot depend on transport buffering), and rejects:
//   - malformed Plans: bad peers, self transfers, regions out of bounds (Input/Output sizes from
//     inputCount/outputCount, Scratch from Plan::scratchCount), writes to the user's Input when the
//     Plan is not in place, overlapping local copies;
//   - unmatched or size-mismatched transfers (FIFO matching per channel and pair of ranks);
//   - deadlock (no rank can progress);
//   - data races: two concurrent accesses of one rank to overlapping elements, at least one a write
//     (transfers of one step; steps of different channels; with loops, steps not ordered by the
//     pipelining rule or by messages);
//   - reductions of uninitialized data or of different elements, a contribution counted twice, and
//     any final Output element that differs from the collective's definition.
// In-place requests alias Input and Output as inPlaceLayout() says. Every message names the rank,
// channel, step (and loop) and element that went wrong.
#pragma once

#include <cstddef>
#include <string>

#include "plan/plan.hpp"

namespace nlccl::plan {

struct VerifyOptions {
  /// When Plan::pipelinable is set, also verify the Plan cut into 2 and 3 pipelined loops.
  bool checkPipelined = true;
  /// Reject writes to Input when the request is not in place (the user's send buffer is const).
  bool forbidInputWrites = true;
};

/// Proves `plan` computes `req`'s collective (plain execution, plus the pipelined executions when
/// the Plan is pipelinable). On failure returns false and, if `why` is not null, explains where.
bool verify(const Plan& plan, const Request& req, std::string* why = nullptr);
bool verify(const Plan& plan, const Request& req, const VerifyOptions& opts, std::string* why);

/// Verifies one execution of `plan` with every region cut into `loops` proportional slices run as
/// pipelined loops: loop k step s may start once loop k step s-1 and loop k-1 step s have
/// completed; every interleaving allowed by that rule (and by message order) must be correct.
/// Slice k of a message matches slice k of its receive (the engine keeps loops apart). Matching,
/// slicing and the pipelining rule are the compiled form's (compiled.hpp). Hazards are
/// judged on the exact happens-before relation for Plans of up to a few thousand step instances
/// and conservatively (loop rule only) beyond. loops = 1 is the plain execution. Ignores
/// Plan::pipelinable.
bool verifyLoops(const Plan& plan, const Request& req, size_t loops, std::string* why = nullptr,
                 const VerifyOptions& opts = {});

}  // namespace nlccl::plan
