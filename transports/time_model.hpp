// Virtual time, offered by transports that model a fabric (the neuronlink transport). Real
// transports have none (Transport::timeModel() returns null) and never read these fields; the
// engine keeps its virtual-time bookkeeping apart (engine/step_clock.hpp), so a reader of the
// data path can skip this file.
#pragma once

#include <cstddef>

namespace nlccl::transport {

/// Modelled times of one posted operation (seconds). The engine attaches one to a Request
/// (Request::timing) when the transport has a time model.
struct Timing {
  double start = 0;            ///< set by the engine: when the operation is posted
  double done = 0;             ///< set by the transport: a send delivered, a receive arrived
  bool remoteReduces = false;  ///< set by the engine on a send: the receiver reduces on arrival
};

/// The clock of one rank on a modelled fabric.
class TimeModel {
 public:
  virtual ~TimeModel() = default;
  /// This rank's virtual clock: when its previous work finished.
  virtual double clock() const = 0;
  virtual void setClock(double t) = 0;
  /// Modelled duration of a local copy (or reduce) of `bytes` on this rank's device.
  virtual double localOpTime(size_t bytes, bool reduce) const = 0;
  /// Modelled start-up cost of one collective (a kernel launch).
  virtual double launchOverhead() const = 0;
};

}  // namespace nlccl::transport
