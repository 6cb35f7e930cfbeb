#include "bootstrap/wire.hpp"

#include <cstring>

namespace nlccl::bootstrap::wire {

namespace {

uint32_t get32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint16_t get16(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }
uint64_t get64(const uint8_t* p) { return uint64_t(get32(p)) | uint64_t(get32(p + 4)) << 32; }
int32_t getI32(const uint8_t* p) { return static_cast<int32_t>(get32(p)); }

void put16(std::vector<uint8_t>& v, uint16_t x) {
  v.push_back(uint8_t(x));
  v.push_back(uint8_t(x >> 8));
}
void put32(std::vector<uint8_t>& v, uint32_t x) {
  for (int i = 0; i < 4; ++i) v.push_back(uint8_t(x >> (8 * i)));
}
void put64(std::vector<uint8_t>& v, uint64_t x) {
  put32(v, uint32_t(x));
  put32(v, uint32_t(x >> 32));
}
void putBytes(std::vector<uint8_t>& v, std::span<const uint8_t> b) {
  v.insert(v.end(), b.begin(), b.end());
}

/// Starts a frame; finish() patches the length once the payload is appended.
std::vector<uint8_t> start(Type t, uint32_t group, uint32_t seq, size_t reserve) {
  std::vector<uint8_t> v;
  v.reserve(kHeaderBytes + reserve);
  put32(v, kFrameMagic);
  put16(v, static_cast<uint16_t>(t));
  put16(v, 0);
  put32(v, group);
  put32(v, seq);
  put32(v, 0);
  return v;
}
std::vector<uint8_t> finish(std::vector<uint8_t> v) {
  uint32_t len = static_cast<uint32_t>(v.size() - kHeaderBytes);
  for (int i = 0; i < 4; ++i) v[16 + i] = uint8_t(len >> (8 * i));
  return v;
}

bool fail(std::string* why, const char* text) {
  if (why) *why = text;
  return false;
}

bool validRankPair(int32_t rank, int32_t nranks, std::string* why) {
  if (nranks < 1 || nranks > kMaxRanks) return fail(why, "nranks out of range");
  if (rank < 0 || rank >= nranks) return fail(why, "rank out of range");
  return true;
}

}  // namespace

Parse parseHeader(std::span<const uint8_t> in, size_t maxPayload, Header* out, std::string* why) {
  if (in.size() < kHeaderBytes) return Parse::NeedMore;
  const uint8_t* p = in.data();
  if (get32(p) != kFrameMagic) {
    if (why) *why = "bad frame magic (garbage bytes)";
    return Parse::Bad;
  }
  uint16_t type = get16(p + 4);
  if (type < static_cast<uint16_t>(Type::Hello) || type > static_cast<uint16_t>(Type::Challenge)) {
    if (why) *why = "unknown message type " + std::to_string(type);
    return Parse::Bad;
  }
  if (get16(p + 6) != 0) {
    if (why) *why = "nonzero reserved header field";
    return Parse::Bad;
  }
  uint32_t length = get32(p + 16);
  if (length > maxPayload) {
    if (why)
      *why = "oversized message: length " + std::to_string(length) + " > limit " +
             std::to_string(maxPayload);
    return Parse::Bad;
  }
  out->type = static_cast<Type>(type);
  out->group = get32(p + 8);
  out->seq = get32(p + 12);
  out->length = length;
  return Parse::Ok;
}

bool parseBody(const Header& h, std::span<const uint8_t> pl, Body* out, std::string* why) {
  if (pl.size() != h.length) return fail(why, "payload length does not match header");
  const uint8_t* p = pl.data();
  const size_t n = pl.size();
  switch (h.type) {
    case Type::Hello: {
      if (n < kProofBytes + 8) return fail(why, "truncated hello");
      if (h.group != kWorldGroup || h.seq != 0) return fail(why, "hello outside round 0");
      Hello m;
      memcpy(m.proof.data(), p, kProofBytes);
      m.rank = getI32(p + kProofBytes);
      m.nranks = getI32(p + kProofBytes + 4);
      if (!validRankPair(m.rank, m.nranks, why)) return false;
      m.signedPart = pl.subspan(kProofBytes);
      m.blob = pl.subspan(kProofBytes + 8);
      *out = m;
      return true;
    }
    case Type::AuthStart: {
      if (h.group != kWorldGroup || h.seq != 0) return fail(why, "auth-start outside round 0");
      if (n != kNonceBytes) return fail(why, "bad auth-start size");
      AuthStart m;
      memcpy(m.nonce.data(), p, kNonceBytes);
      *out = m;
      return true;
    }
    case Type::Challenge: {
      if (h.group != kWorldGroup || h.seq != 0) return fail(why, "challenge outside round 0");
      if (n != kNonceBytes + kProofBytes) return fail(why, "bad challenge size");
      Challenge m;
      memcpy(m.nonce.data(), p, kNonceBytes);
      memcpy(m.proof.data(), p + kNonceBytes, kProofBytes);
      *out = m;
      return true;
    }
    case Type::Gather: {
      if (n < 24) return fail(why, "truncated gather");
      Gather m;
      m.rank = getI32(p);
      m.nranks = getI32(p + 4);
      uint32_t op = get32(p + 8);
      m.root = getI32(p + 12);
      m.bytes = get64(p + 16);
      m.data = pl.subspan(24);
      if (!validRankPair(m.rank, m.nranks, why)) return false;
      if (op > static_cast<uint32_t>(Op::Broadcast)) return fail(why, "unknown gather op");
      m.op = static_cast<Op>(op);
      if (m.bytes > kMaxMessageBytes) return fail(why, "gather size above limit");
      if (m.op == Op::AllGather) {
        if (m.data.size() != m.bytes) return fail(why, "gather data size != declared size");
      } else {
        if (m.root < 0 || m.root >= m.nranks) return fail(why, "broadcast root out of range");
        size_t want = m.rank == m.root ? m.bytes : 0;
        if (m.data.size() != want) return fail(why, "broadcast data size != declared size");
      }
      *out = m;
      return true;
    }
    case Type::Result: {
      if (n < 4) return fail(why, "truncated result");
      uint32_t count = get32(p);
      if (count < 1 || count > static_cast<uint32_t>(kMaxRanks))
        return fail(why, "result rank count out of range");
      // Check the size table fits before allocating anything proportional to `count`.
      if (n < 4 + size_t{4} * count) return fail(why, "truncated result size table");
      size_t off = 4 + size_t{4} * count;
      size_t total = 0;
      for (uint32_t i = 0; i < count; ++i) total += get32(p + 4 + 4 * i);
      if (total != n - off) return fail(why, "result sizes do not add up to the payload");
      Result m;
      m.pieces.reserve(count);
      for (uint32_t i = 0; i < count; ++i) {
        uint32_t sz = get32(p + 4 + 4 * i);
        m.pieces.push_back(pl.subspan(off, sz));
        off += sz;
      }
      *out = std::move(m);
      return true;
    }
    case Type::Query: {
      if (n != 4) return fail(why, "bad query size");
      *out = Query{getI32(p)};
      return true;
    }
    case Type::QueryReply: {
      if (n < 8) return fail(why, "truncated query reply");
      QueryReply m;
      m.nranks = getI32(p);
      uint32_t count = get32(p + 4);
      if (m.nranks < 1 || m.nranks > kMaxRanks) return fail(why, "nranks out of range");
      if (count > static_cast<uint32_t>(m.nranks)) return fail(why, "too many missing ranks");
      if (n != 8 + size_t{4} * count) return fail(why, "query reply size mismatch");
      m.missing.reserve(count);
      for (uint32_t i = 0; i < count; ++i) {
        int32_t r = getI32(p + 8 + 4 * i);
        if (r < 0 || r >= m.nranks) return fail(why, "missing rank out of range");
        m.missing.push_back(r);
      }
      *out = std::move(m);
      return true;
    }
    case Type::PeerDown: {
      if (n < 4) return fail(why, "truncated peer-down");
      int32_t r = getI32(p);
      if (r < 0 || r >= kMaxRanks) return fail(why, "peer-down rank out of range");
      *out = PeerDown{r, std::string_view(reinterpret_cast<const char*>(p + 4), n - 4)};
      return true;
    }
    case Type::Error:
      *out = ErrorMsg{std::string_view(reinterpret_cast<const char*>(p), n)};
      return true;
    case Type::Goodbye:
      if (n != 0) return fail(why, "goodbye with payload");
      *out = Goodbye{};
      return true;
  }
  return fail(why, "unknown message type");
}

Parse parseFrame(std::span<const uint8_t> in, size_t maxPayload, Message* out, size_t* consumed,
                 std::string* why) {
  Parse r = parseHeader(in, maxPayload, &out->header, why);
  if (r != Parse::Ok) return r;
  if (in.size() - kHeaderBytes < out->header.length) return Parse::NeedMore;
  if (!parseBody(out->header, in.subspan(kHeaderBytes, out->header.length), &out->body, why))
    return Parse::Bad;
  *consumed = kHeaderBytes + out->header.length;
  return Parse::Ok;
}

std::vector<uint8_t> helloSignedPart(int32_t rank, int32_t nranks, std::span<const uint8_t> blob) {
  std::vector<uint8_t> v;
  v.reserve(8 + blob.size());
  put32(v, static_cast<uint32_t>(rank));
  put32(v, static_cast<uint32_t>(nranks));
  putBytes(v, blob);
  return v;
}

std::vector<uint8_t> encodeHello(const Proof& proof, std::span<const uint8_t> signedPart) {
  auto v = start(Type::Hello, kWorldGroup, 0, kProofBytes + signedPart.size());
  putBytes(v, proof);
  putBytes(v, signedPart);
  return finish(std::move(v));
}

std::vector<uint8_t> encodeAuthStart(const Nonce& nonce) {
  auto v = start(Type::AuthStart, kWorldGroup, 0, kNonceBytes);
  putBytes(v, nonce);
  return finish(std::move(v));
}

std::vector<uint8_t> encodeChallenge(const Nonce& nonce, const Proof& proof) {
  auto v = start(Type::Challenge, kWorldGroup, 0, kNonceBytes + kProofBytes);
  putBytes(v, nonce);
  putBytes(v, proof);
  return finish(std::move(v));
}

std::vector<uint8_t> encodeGather(uint32_t group, uint32_t seq, const Gather& g) {
  auto v = start(Type::Gather, group, seq, 24 + g.data.size());
  put32(v, static_cast<uint32_t>(g.rank));
  put32(v, static_cast<uint32_t>(g.nranks));
  put32(v, static_cast<uint32_t>(g.op));
  put32(v, static_cast<uint32_t>(g.root));
  put64(v, g.bytes);
  putBytes(v, g.data);
  return finish(std::move(v));
}

std::vector<uint8_t> encodeResult(uint32_t group, uint32_t seq,
                                  const std::vector<std::vector<uint8_t>>& pieces) {
  size_t total = 4 + 4 * pieces.size();
  for (const auto& p : pieces) total += p.size();
  auto v = start(Type::Result, group, seq, total);
  put32(v, static_cast<uint32_t>(pieces.size()));
  for (const auto& p : pieces) put32(v, static_cast<uint32_t>(p.size()));
  for (const auto& p : pieces) putBytes(v, p);
  return finish(std::move(v));
}

std::vector<uint8_t> encodeQuery(uint32_t group, uint32_t seq, int32_t rank) {
  auto v = start(Type::Query, group, seq, 4);
  put32(v, static_cast<uint32_t>(rank));
  return finish(std::move(v));
}

std::vector<uint8_t> encodeQueryReply(uint32_t group, uint32_t seq, int32_t nranks,
                                      const std::vector<int32_t>& missing) {
  auto v = start(Type::QueryReply, group, seq, 8 + 4 * missing.size());
  put32(v, static_cast<uint32_t>(nranks));
  put32(v, static_cast<uint32_t>(missing.size()));
  for (int32_t r : missing) put32(v, static_cast<uint32_t>(r));
  return finish(std::move(v));
}

std::vector<uint8_t> encodePeerDown(int32_t rank, std::string_view reason) {
  auto v = start(Type::PeerDown, kWorldGroup, 0, 4 + reason.size());
  put32(v, static_cast<uint32_t>(rank));
  v.insert(v.end(), reason.begin(), reason.end());
  return finish(std::move(v));
}

std::vector<uint8_t> encodeError(uint32_t group, uint32_t seq, std::string_view text) {
  auto v = start(Type::Error, group, seq, text.size());
  v.insert(v.end(), text.begin(), text.end());
  return finish(std::move(v));
}

std::vector<uint8_t> encodeGoodbye() { return finish(start(Type::Goodbye, kWorldGroup, 0, 0)); }

std::string formatRankList(const std::vector<int32_t>& ranks, size_t max) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i == max) {
      s += ",...(" + std::to_string(ranks.size() - max) + " more)";
      break;
    }
    if (i) s += ',';
    s += std::to_string(ranks[i]);
  }
  return s;
}

}  // namespace nlccl::bootstrap::wire
