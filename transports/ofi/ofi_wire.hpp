// What the ofi transport puts on the wire: the libfabric tags it posts with and the header of its
// control messages (see ofi.hpp for the protocol they carry).
//
// Tags: [kind | source rank | id], laid out in the provider's tag width (mem_tag_format). The
// source rank is in every tag, so a receive names its peer without FI_DIRECTED_RECV and each
// peer has its own posted buffers and credits. Control messages carry id 0; the data of a
// rendezvous fragment carries the id the receiver chose for it in its clear-to-send.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nlccl::transport::ofi {

enum class TagKind : uint64_t { Ctrl = 1, Data = 2 };

/// The field widths of one transport's tags.
struct TagLayout {
  int idBits = 0;
  int rankBits = 0;
  /// Fits kind (2 bits) and ranks 0..nranks-1 into `tagBits`; false when fewer than 24 bits
  /// would be left for ids.
  bool init(int tagBits, int nranks);
  uint64_t idMask() const { return (uint64_t{1} << idBits) - 1; }
  uint64_t make(TagKind kind, int src, uint64_t id) const {
    return (static_cast<uint64_t>(kind) << (idBits + rankBits)) |
           (static_cast<uint64_t>(src) << idBits) | (id & idMask());
  }
};

constexpr uint32_t kWireMagic = 0x6f6c6e31;  // "1nlo"

enum class MsgType : uint16_t {
  Eager = 1,   ///< a whole small message: header, then `bytes` of payload (sequenced)
  Rts = 2,     ///< ready to send `bytes` as rendezvous message `msgId` (sequenced)
  Cts = 3,     ///< clear to send [offset, offset+bytes) of `msgId` in fragments of `fragBytes`
  Credit = 4,  ///< only returns credits; needs none itself
  Ping = 5,    ///< "are you there": sent to a silent peer something waits for; needs no credit
  Pong = 6,    ///< the answer to a Ping; needs no credit
  Grant = 7,   ///< a Cts sent when the receive is posted, before its Rts arrived: for the first
               ///< message with `tag` whose seq is at least `seq`; `msgId` holds the bytes the
               ///< receive expects (the sender's id is not known yet), `offset` is 0
};

/// Every control message starts with this (64 bytes). Eager and Rts messages carry a per-direction
/// sequence number from 1: the receiver handles them in that order whatever order the provider
/// delivers them in, which is what matching "in posting order" needs.
struct CtrlHeader {
  uint32_t magic;
  MsgType type;
  uint16_t credits;    ///< credits returned to the receiver of this message (piggybacked)
  uint64_t seq;        ///< Eager, Rts: 1, 2, ... per direction; Grant: the first it can match
  uint64_t tag;        ///< Eager, Rts, Grant: the nlccl tag
  uint64_t bytes;      ///< Eager, Rts: message bytes; Cts, Grant: bytes granted
  uint64_t msgId;      ///< Rts, Cts: the sender's id of the rendezvous message; Grant: total bytes
  uint64_t offset;     ///< Cts: first byte granted
  uint64_t dataId;     ///< Cts: tag id of the first fragment; the next ones count up
  uint64_t fragBytes;  ///< Cts: bytes per fragment; 0 means "size mismatch: drop the message"
};
static_assert(sizeof(CtrlHeader) == 64);

}  // namespace nlccl::transport::ofi
