#include "bootstrap/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "util/log.hpp"

namespace nlccl::bootstrap::auth {

namespace {

constexpr std::string_view kRootLabel = "nlccl-bootstrap-root-v1";
constexpr std::string_view kRankLabel = "nlccl-bootstrap-rank-v1";

wire::Proof mac(const Secret& secret, std::string_view label, const wire::Nonce& rankNonce,
                const wire::Nonce& rootNonce, std::span<const uint8_t> tail) {
  std::vector<uint8_t> msg;
  msg.reserve(label.size() + 2 * wire::kNonceBytes + tail.size());
  msg.insert(msg.end(), label.begin(), label.end());
  msg.insert(msg.end(), rankNonce.begin(), rankNonce.end());
  msg.insert(msg.end(), rootNonce.begin(), rootNonce.end());
  msg.insert(msg.end(), tail.begin(), tail.end());
  wire::Proof out{};
  unsigned int len = 0;
  // HMAC() only fails on an allocation failure or an unusable digest; an all-zero proof then
  // fails verification on the other side, which is the safe outcome.
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg.data(), msg.size(),
           out.data(), &len) == nullptr ||
      len != out.size()) {
    WARN("bootstrap: HMAC-SHA256 failed (OpenSSL error %lu)", ERR_get_error());
    out.fill(0);
  }
  return out;
}

}  // namespace

Status randomBytes(std::span<uint8_t> out) {
  if (out.empty()) return Status::Success;
  if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1) {
    WARN("bootstrap: no random bytes from OpenSSL (error %lu)", ERR_get_error());
    return Status::SystemError;
  }
  return Status::Success;
}

wire::Proof rootProof(const Secret& secret, const wire::Nonce& rankNonce,
                      const wire::Nonce& rootNonce) {
  return mac(secret, kRootLabel, rankNonce, rootNonce, {});
}

wire::Proof rankProof(const Secret& secret, const wire::Nonce& rankNonce,
                      const wire::Nonce& rootNonce, std::span<const uint8_t> signedPart) {
  return mac(secret, kRankLabel, rankNonce, rootNonce, signedPart);
}

bool sameProof(const wire::Proof& a, const wire::Proof& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

void wipe(std::span<uint8_t> bytes) {
  if (!bytes.empty()) OPENSSL_cleanse(bytes.data(), bytes.size());
}

}  // namespace nlccl::bootstrap::auth
