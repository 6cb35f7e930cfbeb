// The bootstrap wire format: length-prefixed frames between ranks and the root server, and the
// pure functions that encode and parse them. Parsing never trusts the input: every length is
// checked against the bytes present and against hard maxima before anything is allocated, so a
// garbage, truncated or oversized frame is refused with a reason (the fuzz target covers this file).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace nlccl::bootstrap::wire {

/// First four bytes of every frame ("NLBS").
constexpr uint32_t kFrameMagic = 0x53424c4eu;
/// magic u32, type u16, reserved u16, group u32, seq u32, payload length u32 (little-endian).
constexpr size_t kHeaderBytes = 20;
/// Largest payload accepted before a connection has authenticated (its hello).
constexpr size_t kMaxHelloBytes = 64 * 1024;
/// Largest payload accepted from an authenticated peer (also bounds an all-gather result).
constexpr size_t kMaxMessageBytes = size_t{64} << 20;
/// Largest communicator the bootstrap accepts.
constexpr int32_t kMaxRanks = 1 << 16;
/// Group of the communicator formed by init (sub-communicators from split use other ids).
constexpr uint32_t kWorldGroup = 0;
/// Fresh random bytes each side contributes to a handshake.
constexpr size_t kNonceBytes = 32;
/// An HMAC-SHA256 value.
constexpr size_t kProofBytes = 32;
using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

// The handshake (all in group 0 / seq 0): AuthStart (rank's nonce), Challenge (root's nonce and
// the root's proof over both), Hello (the rank's proof over both, binding its rank, nranks, blob).
// Before it, either side accepts only these (and Error) and frames of at most kMaxHelloBytes.
enum class Type : uint16_t {
  Hello = 1,       ///< rank -> root: proof, rank, nranks, blob (ends the handshake; joins round 0)
  Gather = 2,      ///< rank -> root: one contribution to a round (group, seq)
  Result = 3,      ///< root -> rank: every rank's piece of a finished round
  Query = 4,       ///< rank -> root: which ranks has round (group, seq) not heard from?
  QueryReply = 5,  ///< root -> rank: nranks and the missing ranks
  PeerDown = 6,    ///< root -> rank: a rank's connection dropped (or it aborted)
  Error = 7,       ///< root -> rank: a round failed (mismatched sizes, ...)
  Goodbye = 8,     ///< rank -> root: orderly close follows; not a failure
  AuthStart = 9,   ///< rank -> root: the rank's nonce (first frame of a connection)
  Challenge = 10,  ///< root -> rank: the root's nonce and the root's proof
};

/// What a Gather round computes at the root.
enum class Op : uint32_t { AllGather = 0, Broadcast = 1 };

struct Header {
  Type type = Type::Hello;
  uint32_t group = 0;
  uint32_t seq = 0;
  uint32_t length = 0;  ///< payload bytes after the header
};

struct Hello {
  Proof proof{};
  int32_t rank = -1;
  int32_t nranks = 0;
  std::span<const uint8_t> blob;
  std::span<const uint8_t> signedPart;  ///< the payload after the proof (what the proof covers)
};
struct AuthStart {
  Nonce nonce{};
};
struct Challenge {
  Nonce nonce{};
  Proof proof{};
};
struct Gather {
  int32_t rank = -1;
  int32_t nranks = 0;
  Op op = Op::AllGather;
  int32_t root = 0;
  uint64_t bytes = 0;  ///< per-rank size every rank declares (must agree)
  std::span<const uint8_t> data;
};
struct Result {
  std::vector<std::span<const uint8_t>> pieces;  ///< one per rank, in rank order
};
struct Query {
  int32_t rank = -1;
};
struct QueryReply {
  int32_t nranks = 0;
  std::vector<int32_t> missing;
};
struct PeerDown {
  int32_t rank = -1;
  std::string_view reason;
};
struct ErrorMsg {
  std::string_view text;
};
struct Goodbye {};

using Body = std::variant<Hello, Gather, Result, Query, QueryReply, PeerDown, ErrorMsg, Goodbye,
                          AuthStart, Challenge>;

/// A parsed frame. Spans point into the input buffer.
struct Message {
  Header header;
  Body body;
};

enum class Parse { Ok, NeedMore, Bad };

/// Parses a header from the start of `in`. NeedMore if fewer than kHeaderBytes; Bad (with `why`) on
/// a wrong magic, unknown type or a payload length above `maxPayload`.
Parse parseHeader(std::span<const uint8_t> in, size_t maxPayload, Header* out, std::string* why);

/// Parses the payload of a frame whose header is `h` (payload.size() == h.length).
bool parseBody(const Header& h, std::span<const uint8_t> payload, Body* out, std::string* why);

/// Parses one whole frame from the start of a byte stream: NeedMore until header and payload are
/// all present; on Ok, *consumed is the frame's size. Pure: no I/O, no allocation beyond `out`.
Parse parseFrame(std::span<const uint8_t> in, size_t maxPayload, Message* out, size_t* consumed,
                 std::string* why);

// ---- encoders (each returns a whole frame) ----
/// The bytes a Hello's proof covers: rank, nranks and blob exactly as encodeHello writes them.
std::vector<uint8_t> helloSignedPart(int32_t rank, int32_t nranks, std::span<const uint8_t> blob);
/// A Hello carrying `proof` and `signedPart` (from helloSignedPart).
std::vector<uint8_t> encodeHello(const Proof& proof, std::span<const uint8_t> signedPart);
std::vector<uint8_t> encodeAuthStart(const Nonce& nonce);
std::vector<uint8_t> encodeChallenge(const Nonce& nonce, const Proof& proof);
std::vector<uint8_t> encodeGather(uint32_t group, uint32_t seq, const Gather& g);
std::vector<uint8_t> encodeResult(uint32_t group, uint32_t seq,
                                  const std::vector<std::vector<uint8_t>>& pieces);
std::vector<uint8_t> encodeQuery(uint32_t group, uint32_t seq, int32_t rank);
std::vector<uint8_t> encodeQueryReply(uint32_t group, uint32_t seq, int32_t nranks,
                                      const std::vector<int32_t>& missing);
std::vector<uint8_t> encodePeerDown(int32_t rank, std::string_view reason);
std::vector<uint8_t> encodeError(uint32_t group, uint32_t seq, std::string_view text);
std::vector<uint8_t> encodeGoodbye();

/// "2,3" (ranges are not collapsed; lists are short in practice and capped at `max` entries).
std::string formatRankList(const std::vector<int32_t>& ranks, size_t max = 32);

}  // namespace nlccl::bootstrap::wire
