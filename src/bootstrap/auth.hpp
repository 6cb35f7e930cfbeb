// The bootstrap handshake's cryptography (HMAC-SHA256 and random bytes from OpenSSL's libcrypto).
// Each side proves it holds the unique id's secret by a MAC over both sides' fresh nonces, so the
// secret never crosses the wire and a recorded exchange does not verify on another connection.
// docs/security.md describes the handshake and what it does and does not protect.
#pragma once

#include <cstdint>
#include <span>

#include "bootstrap/unique_id.hpp"
#include "bootstrap/wire.hpp"
#include "util/status.hpp"

namespace nlccl::bootstrap::auth {

/// Fills `out` from OpenSSL's CSPRNG; SystemError (with a WARN) if it cannot.
Status randomBytes(std::span<uint8_t> out);

/// The root's proof, sent in the Challenge:
/// HMAC-SHA256(secret, "nlccl-bootstrap-root-v1" | rankNonce | rootNonce).
wire::Proof rootProof(const Secret& secret, const wire::Nonce& rankNonce,
                      const wire::Nonce& rootNonce);

/// The rank's proof, sent in its Hello: HMAC-SHA256(secret, "nlccl-bootstrap-rank-v1" | rankNonce |
/// rootNonce | signedPart), where signedPart is the hello payload after the proof (rank, nranks
/// and blob as encoded), so the proof also binds what the rank claims to be.
wire::Proof rankProof(const Secret& secret, const wire::Nonce& rankNonce,
                      const wire::Nonce& rootNonce, std::span<const uint8_t> signedPart);

/// Constant-time comparison (CRYPTO_memcmp): how long it takes does not depend on where a forged
/// proof first differs.
bool sameProof(const wire::Proof& a, const wire::Proof& b);

/// Overwrites `bytes` in a way the compiler may not elide (OPENSSL_cleanse).
void wipe(std::span<uint8_t> bytes);

}  // namespace nlccl::bootstrap::auth
