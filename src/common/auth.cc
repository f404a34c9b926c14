#include "common/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "common/crypto.h"

namespace kvpool::auth {

namespace {

constexpr const char* kRoleNames[kNumRoles] = {"node", "router", "admin",
                                               "tenant"};
// Secret and credential files are a few hundred bytes; the bound keeps a
// wrong path (a log, a device) from being read whole.
constexpr size_t kMaxFileSize = 64 << 10;
constexpr size_t kMaxTokenSize = 512;

Status Bad(std::string msg) {
  return Status(ErrorCode::INVALID_PARAMS, std::move(msg));
}
Status Refused(std::string msg) {
  return Status(ErrorCode::ILLEGAL_CLIENT, std::move(msg));
}

std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(kSpace);
  return s.substr(b, e - b + 1);
}

std::string MacBytes(std::string_view key, std::string_view data) {
  crypto::Mac m = crypto::HmacSha256(key, data);
  return std::string(reinterpret_cast<const char*>(m.data()), m.size());
}

std::string SignedText(Role role, std::string_view principal, int64_t issued_ms,
                       std::string_view method) {
  return fmt::format("v1|{}|{}|{}|{}", RoleName(role), principal, issued_ms,
                     method);
}

Status CheckMode(const struct stat& st, const std::string& path) {
  if (!S_ISREG(st.st_mode)) return Bad(path + ": not a regular file");
  if ((st.st_mode & 077) != 0) {
    return Bad(fmt::format(
        "{} holds a key but group or others may access it (mode {:04o}); "
        "run chmod 600 {}",
        path, st.st_mode & 07777, path));
  }
  return Status::OK();
}

Status OpenError(const std::string& path, int err) {
  return Status(
      err == ENOENT ? ErrorCode::FILE_NOT_FOUND : ErrorCode::FILE_READ_FAIL,
      fmt::format("{}: {}", path, std::strerror(err)));
}

// Reads `fd` to the end and closes it; refuses more than `max` bytes.
Result<std::string> ReadAndClose(int fd, const std::string& path, size_t max) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0 && out.size() <= max)
    out.append(buf, static_cast<size_t>(n));
  int err = errno;
  close(fd);
  if (n < 0) return OpenError(path, err);
  if (out.size() > max) {
    return Bad(
        fmt::format("{}: larger than {} bytes, not the file meant", path, max));
  }
  return out;
}

Result<std::string> ReadPrivateFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OpenError(path, errno);
  // The mode of what was opened, not of what the path names a moment later.
  struct stat st;
  Status mode =
      fstat(fd, &st) == 0 ? CheckMode(st, path) : OpenError(path, errno);
  if (!mode.ok()) {
    close(fd);
    return mode;
  }
  return ReadAndClose(fd, path, kMaxFileSize);
}

}  // namespace

const char* RoleName(Role role) {
  return kRoleNames[static_cast<size_t>(role)];
}

std::optional<Role> ParseRole(std::string_view name) {
  for (int i = 0; i < kNumRoles; ++i) {
    if (name == kRoleNames[i]) return static_cast<Role>(i);
  }
  return std::nullopt;
}

int64_t UnixNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status CheckPrivateFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return OpenError(path, errno);
  return CheckMode(st, path);
}

Status WritePrivateFile(const std::string& path, std::string_view content) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status(ErrorCode::FILE_WRITE_FAIL,
                  fmt::format("{}: {}", tmp, std::strerror(errno)));
  }
  // The umask may only narrow 0600; this makes sure of it either way.
  bool ok = fchmod(fd, 0600) == 0;
  size_t done = 0;
  while (ok && done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ok && fsync(fd) == 0;
  int err = errno;
  ok = close(fd) == 0 && ok;
  if (ok && rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    unlink(tmp.c_str());
    return Status(ErrorCode::FILE_WRITE_FAIL,
                  fmt::format("{}: {}", path, std::strerror(err)));
  }
  return Status::OK();
}

Result<std::string> ReadSmallFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OpenError(path, errno);
  return ReadAndClose(fd, path, 1 << 20);
}

Status ValidatePrincipal(std::string_view principal) {
  if (principal.empty() || principal.size() > kMaxPrincipalSize) {
    return Bad(fmt::format("principal must be 1..{} bytes", kMaxPrincipalSize));
  }
  for (char c : principal) {
    if (c <= ' ' || c > '~') {
      return Bad(fmt::format(
          "principal '{}': only printable ASCII without spaces can be "
          "carried in a credential",
          principal));
    }
  }
  return Status::OK();
}

Result<ClusterSecret> ClusterSecret::Load(const std::string& path) {
  auto text = ReadPrivateFile(path);
  if (!text.ok()) return text.status();
  auto s = FromHex(text.value());
  if (!s.ok()) return Bad(path + ": " + s.status().message());
  return s;
}

Result<ClusterSecret> ClusterSecret::FromHex(std::string_view text) {
  std::string bytes;
  if (!crypto::FromHex(Trim(text), &bytes)) {
    return Bad("the cluster secret is not hex");
  }
  if (bytes.size() < kMinSecretBytes) {
    return Bad(fmt::format(
        "the cluster secret has {} bytes, at least {} ({} hex digits) are "
        "needed; make one with `kvpool credential --new-secret`",
        bytes.size(), kMinSecretBytes, 2 * kMinSecretBytes));
  }
  return ClusterSecret(std::move(bytes));
}

ClusterSecret ClusterSecret::Generate() {
  return ClusterSecret(crypto::RandomBytes(kMinSecretBytes));
}

std::string ClusterSecret::ToHex() const { return crypto::ToHex(bytes_); }

std::string ClusterSecret::RoleKey(Role role) const {
  return MacBytes(bytes_, std::string("kvpool/role/") + RoleName(role));
}

std::string ClusterSecret::TenantKey(std::string_view tenant) const {
  return MacBytes(bytes_, std::string("kvpool/tenant/").append(tenant));
}

std::string Credential::Token(std::string_view method,
                              int64_t issued_ms) const {
  std::string mac =
      MacBytes(key, SignedText(role, principal, issued_ms, method));
  return fmt::format("v1:{}:{}:{}:{}", RoleName(role), principal, issued_ms,
                     crypto::ToHex(mac));
}

Result<Credential> MakeCredential(const ClusterSecret& secret, Role role,
                                  std::string_view principal) {
  if (Status s = ValidatePrincipal(principal); !s.ok()) return s;
  Credential c;
  c.role = role;
  c.principal = std::string(principal);
  c.key = role == Role::kTenant ? secret.TenantKey(principal)
                                : secret.RoleKey(role);
  return c;
}

std::string FormatCredentialFile(const Credential& c) {
  return fmt::format("role={}\nprincipal={}\nkey={}\n", RoleName(c.role),
                     c.principal, crypto::ToHex(c.key));
}

Result<Credential> ParseCredentialFile(std::string_view text) {
  Credential c;
  bool has_role = false, has_principal = false, has_key = false;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = Trim(text.substr(0, nl));
    text =
        nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty() || line[0] == '#') continue;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      return Bad(fmt::format("credential line '{}' is not key=value", line));
    }
    std::string_view k = Trim(line.substr(0, eq)),
                     v = Trim(line.substr(eq + 1));
    if (k == "role") {
      auto r = ParseRole(v);
      if (!r) return Bad(fmt::format("unknown role '{}' in credential", v));
      c.role = *r;
      has_role = true;
    } else if (k == "principal") {
      if (Status s = ValidatePrincipal(v); !s.ok()) return s;
      c.principal = std::string(v);
      has_principal = true;
    } else if (k == "key") {
      if (!crypto::FromHex(v, &c.key) || c.key.size() != crypto::kHmacSize) {
        return Bad(fmt::format("credential key must be {} hex digits",
                               2 * crypto::kHmacSize));
      }
      has_key = true;
    } else {
      return Bad(fmt::format("unknown credential field '{}'", k));
    }
  }
  if (!has_role || !has_principal || !has_key) {
    return Bad("a credential needs role=, principal= and key= lines");
  }
  return c;
}

Result<Credential> LoadCredential(const std::string& path, Role secret_role,
                                  std::string_view secret_principal) {
  auto text = ReadPrivateFile(path);
  if (!text.ok()) return text.status();
  if (text.value().find('=') != std::string::npos) {
    auto c = ParseCredentialFile(text.value());
    if (!c.ok()) return Bad(path + ": " + c.status().message());
    return c;
  }
  auto secret = ClusterSecret::FromHex(text.value());
  if (!secret.ok()) return Bad(path + ": " + secret.status().message());
  return MakeCredential(secret.value(), secret_role, secret_principal);
}

Status ParseToken(std::string_view token, ParsedToken* out) {
  if (token.size() > kMaxTokenSize)
    return Refused("kvpool-auth token too long");
  constexpr std::string_view kVersion = "v1:";
  if (token.substr(0, kVersion.size()) != kVersion) {
    return Refused("kvpool-auth token of an unknown version (want v1)");
  }
  std::string_view rest = token.substr(kVersion.size());
  size_t role_end = rest.find(':');
  size_t mac_colon = rest.rfind(':');
  size_t issued_colon = mac_colon == std::string_view::npos || mac_colon == 0
                            ? std::string_view::npos
                            : rest.rfind(':', mac_colon - 1);
  if (role_end == std::string_view::npos ||
      issued_colon == std::string_view::npos || issued_colon <= role_end) {
    return Refused(
        "malformed kvpool-auth token (want "
        "v1:role:principal:issued_ms:mac)");
  }
  auto role = ParseRole(rest.substr(0, role_end));
  if (!role) {
    return Refused(fmt::format("unknown role '{}' in kvpool-auth token",
                               rest.substr(0, role_end)));
  }
  out->role = *role;
  out->principal = rest.substr(role_end + 1, issued_colon - role_end - 1);
  if (!ValidatePrincipal(out->principal).ok()) {
    return Refused("bad principal in kvpool-auth token");
  }
  std::string_view issued =
      rest.substr(issued_colon + 1, mac_colon - issued_colon - 1);
  auto [end, ec] = std::from_chars(issued.data(), issued.data() + issued.size(),
                                   out->issued_ms);
  if (ec != std::errc() || end != issued.data() + issued.size() ||
      issued.empty() || issued[0] == '-') {
    return Refused("bad issue time in kvpool-auth token");
  }
  if (!crypto::FromHex(rest.substr(mac_colon + 1), &out->mac) ||
      out->mac.size() != crypto::kHmacSize) {
    return Refused("bad MAC field in kvpool-auth token");
  }
  return Status::OK();
}

TokenVerifier::TokenVerifier(const ClusterSecret& secret,
                             int64_t max_clock_skew_ms)
    : secret_(secret), max_clock_skew_ms_(max_clock_skew_ms) {
  for (Role r : {Role::kNode, Role::kRouter, Role::kAdmin}) {
    role_keys_[static_cast<size_t>(r)] = secret_.RoleKey(r);
  }
}

bool TokenVerifier::MacMatches(const ParsedToken& token,
                               std::string_view method) const {
  if (token.mac.size() != crypto::kHmacSize) return false;
  // A tenant key costs one HMAC more per call; role keys are prepared once.
  std::string tenant_key;
  if (token.role == Role::kTenant)
    tenant_key = secret_.TenantKey(token.principal);
  const std::string& key = token.role == Role::kTenant
                               ? tenant_key
                               : role_keys_[static_cast<size_t>(token.role)];
  crypto::Mac want = crypto::HmacSha256(
      key, SignedText(token.role, token.principal, token.issued_ms, method));
  return crypto::ConstantTimeEqual(want.data(), token.mac.data(),
                                   crypto::kHmacSize);
}

Status TokenVerifier::CheckFreshness(int64_t issued_ms, int64_t now_ms) const {
  if (now_ms - issued_ms > max_clock_skew_ms_) {
    return Refused(fmt::format(
        "token too old: issued {} ms ago, the master accepts {} ms: check "
        "clocks",
        now_ms - issued_ms, max_clock_skew_ms_));
  }
  if (issued_ms - now_ms > max_clock_skew_ms_) {
    return Refused(fmt::format(
        "token issued {} ms in the future, the master accepts {} ms of skew: "
        "check clocks",
        issued_ms - now_ms, max_clock_skew_ms_));
  }
  return Status::OK();
}

Status TokenVerifier::Verify(std::string_view token, std::string_view method,
                             int64_t now_ms, ParsedToken* out) const {
  if (Status s = ParseToken(token, out); !s.ok()) return s;
  if (!MacMatches(*out, method)) {
    return Refused(
        "bad signature on kvpool-auth token (wrong key, or a token minted "
        "for another RPC)");
  }
  return CheckFreshness(out->issued_ms, now_ms);
}

}  // namespace kvpool::auth
