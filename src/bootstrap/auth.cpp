#include "bootstrap/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>

#include <cstring>
#include <mutex>
#include <string_view>
#include <vector>

#include "util/log.hpp"

namespace nlccl::bootstrap::auth {

namespace {

/// Held around every libcrypto call that may take one of OpenSSL's locks (HMAC fetches the
/// digest and MAC under a global rwlock, RAND_bytes locks its DRBG), and taken by fork() itself
/// (pthread_atfork) until the child exists. A process that forks while the root's thread, or a
/// rank's io thread, is inside such a call otherwise hands the child that lock held by a thread
/// the child does not have, and the child's first handshake blocks on it for ever (a rank of a
/// program that forks its ranks after nlcclGetUniqueId: stop 37 saw it in a test). libcrypto
/// calls made by other code of the process are not covered.
std::mutex& forkGuard() {
  static std::mutex mu;
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork([] { mu.lock(); }, [] { mu.unlock(); }, [] { mu.unlock(); });
  });
  return mu;
}

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
  const unsigned char* ok;
  {
    std::lock_guard<std::mutex> lock(forkGuard());
    ok = HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg.data(),
              msg.size(), out.data(), &len);
  }
  if (ok == nullptr || len != out.size()) {
    WARN("bootstrap: HMAC-SHA256 failed (OpenSSL error %lu)", ERR_get_error());
    out.fill(0);
  }
  return out;
}

}  // namespace

Status randomBytes(std::span<uint8_t> out) {
  if (out.empty()) return Status::Success;
  int ok;
  {
    std::lock_guard<std::mutex> lock(forkGuard());
    ok = RAND_bytes(out.data(), static_cast<int>(out.size()));
  }
  if (ok != 1) {
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
