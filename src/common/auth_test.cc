#include "common/auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/crypto.h"

namespace kvpool::auth {
namespace {

constexpr char kMethod[] = "/kvpool.rpc.MasterService/PutStart";
constexpr int64_t kNow = 1'700'000'000'000;
constexpr int64_t kSkew = kDefaultMaxClockSkewMs;

ClusterSecret Secret(char fill = 'a') {
  auto s = ClusterSecret::FromHex(std::string(64, fill));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.value();
}

std::string Raw(const crypto::Mac& m) {
  return std::string(reinterpret_cast<const char*>(m.data()), m.size());
}

Credential Tenant(const ClusterSecret& s, const std::string& name) {
  auto c = MakeCredential(s, Role::kTenant, name);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.value();
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "/kvpool_auth_XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name, const std::string& content,
                   mode_t mode) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p) << content;
    chmod(p.c_str(), mode);
    return p;
  }

 private:
  std::string path_;
};

TEST(AuthTest, KeysAreHmacsOfTheSecretAndDifferPerIdentity) {
  std::string raw;
  ASSERT_TRUE(crypto::FromHex(std::string(64, 'a'), &raw));
  ClusterSecret s = Secret();
  EXPECT_EQ(s.RoleKey(Role::kNode),
            Raw(crypto::HmacSha256(raw, "kvpool/role/node")));
  EXPECT_EQ(s.RoleKey(Role::kAdmin),
            Raw(crypto::HmacSha256(raw, "kvpool/role/admin")));
  EXPECT_EQ(s.TenantKey("acme"),
            Raw(crypto::HmacSha256(raw, "kvpool/tenant/acme")));
  EXPECT_NE(s.RoleKey(Role::kNode), s.RoleKey(Role::kRouter));
  EXPECT_NE(s.TenantKey("a"), s.TenantKey("b"));
  EXPECT_NE(Secret('b').TenantKey("a"), s.TenantKey("a"));
  EXPECT_EQ(Tenant(s, "acme").key, s.TenantKey("acme"));
}

TEST(AuthTest, GoodTokenVerifiesAndNamesItsIdentity) {
  ClusterSecret s = Secret();
  TokenVerifier v(s, kSkew);
  std::string token = Tenant(s, "acme").Token(kMethod, kNow);
  ParsedToken t;
  ASSERT_TRUE(v.Verify(token, kMethod, kNow + 1000, &t).ok());
  EXPECT_EQ(t.role, Role::kTenant);
  EXPECT_EQ(t.principal, "acme");
  EXPECT_EQ(t.issued_ms, kNow);

  auto admin = MakeCredential(s, Role::kAdmin, "ops:alice");
  ASSERT_TRUE(admin.ok());
  token = admin->Token(kMethod, kNow);
  ASSERT_TRUE(v.Verify(token, kMethod, kNow, &t).ok());
  EXPECT_EQ(t.role, Role::kAdmin);
  EXPECT_EQ(t.principal, "ops:alice");  // a ':' in the principal is fine
}

TEST(AuthTest, TamperedTokensAreRefused) {
  ClusterSecret s = Secret();
  TokenVerifier v(s, kSkew);
  const std::string good = Tenant(s, "alpha").Token(kMethod, kNow);
  ParsedToken t;
  ASSERT_TRUE(v.Verify(good, kMethod, kNow, &t).ok());
  auto refused = [&](const std::string& token) {
    Status st = v.Verify(token, kMethod, kNow, &t);
    EXPECT_EQ(st.code(), ErrorCode::ILLEGAL_CLIENT) << token;
    return st.message();
  };
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string x = good;
    x.replace(x.find(from), from.size(), to);
    return x;
  };
  // Another tenant's name with this tenant's MAC.
  EXPECT_NE(refused(replace(":alpha:", ":bravo:")).find("bad signature"),
            std::string::npos);
  EXPECT_NE(refused(replace("v1:tenant:", "v1:admin:")).find("bad signature"),
            std::string::npos);
  EXPECT_NE(refused(replace(std::to_string(kNow), std::to_string(kNow + 1)))
                .find("bad signature"),
            std::string::npos);
  std::string flipped = good;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  EXPECT_NE(refused(flipped).find("bad signature"), std::string::npos);
  // Same token, another RPC.
  EXPECT_FALSE(
      v.Verify(good, "/kvpool.rpc.MasterService/Remove", kNow, &t).ok());
  // A token of another cluster.
  EXPECT_FALSE(
      TokenVerifier(Secret('b'), kSkew).Verify(good, kMethod, kNow, &t).ok());
  EXPECT_NE(refused(replace("v1:tenant:", "v1:wizard:")).find("unknown role"),
            std::string::npos);
  refused("v2:tenant:alpha:1:00");
  refused("v1:tenant:alpha");
  refused("v1:tenant:alpha:12x:" + std::string(64, '0'));
  refused("v1:tenant:alpha:-5:" + std::string(64, '0'));
  refused("v1:tenant:alpha:5:abcd");
  refused("v1:tenant::5:" + std::string(64, '0'));
  refused("");
}

TEST(AuthTest, TokensOutsideTheSkewWindowAreRefused) {
  ClusterSecret s = Secret();
  TokenVerifier v(s, kSkew);
  Credential c = Tenant(s, "acme");
  ParsedToken t;
  EXPECT_TRUE(v.Verify(c.Token(kMethod, kNow - kSkew), kMethod, kNow, &t).ok());
  EXPECT_TRUE(v.Verify(c.Token(kMethod, kNow + kSkew), kMethod, kNow, &t).ok());
  Status old = v.Verify(c.Token(kMethod, kNow - kSkew - 1), kMethod, kNow, &t);
  EXPECT_EQ(old.code(), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_NE(old.message().find("token too old"), std::string::npos);
  EXPECT_NE(old.message().find("check clocks"), std::string::npos);
  Status future =
      v.Verify(c.Token(kMethod, kNow + kSkew + 1), kMethod, kNow, &t);
  EXPECT_NE(future.message().find("in the future"), std::string::npos);
  TokenVerifier tight(s, 10);
  EXPECT_FALSE(
      tight.Verify(c.Token(kMethod, kNow - 11), kMethod, kNow, &t).ok());
}

TEST(AuthTest, SecretFileMustBePrivateLongAndHex) {
  TempDir dir;
  const std::string hex(64, 'c');
  auto ok = ClusterSecret::Load(dir.File("ok", "  " + hex + "\n\n", 0600));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->ToHex(), hex);
  EXPECT_TRUE(ClusterSecret::Load(dir.File("ro", hex, 0400)).ok());

  auto group = ClusterSecret::Load(dir.File("group", hex, 0640));
  EXPECT_EQ(group.code(), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(group.status().message().find("chmod 600"), std::string::npos);
  EXPECT_FALSE(ClusterSecret::Load(dir.File("world", hex, 0604)).ok());
  EXPECT_FALSE(ClusterSecret::Load(dir.File("gw", hex, 0620)).ok());

  auto short_one = ClusterSecret::Load(dir.File("short", hex.substr(2), 0600));
  EXPECT_EQ(short_one.code(), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(short_one.status().message().find("at least 32"),
            std::string::npos);
  EXPECT_FALSE(
      ClusterSecret::Load(dir.File("nothex", std::string(64, 'z'), 0600)).ok());
  EXPECT_EQ(ClusterSecret::Load(dir.File("x", "", 0600) + ".missing").code(),
            ErrorCode::FILE_NOT_FOUND);
}

TEST(AuthTest, CredentialFilesRoundTripAndSecretFilesMakeTheGivenRole) {
  TempDir dir;
  ClusterSecret s = ClusterSecret::Generate();
  EXPECT_NE(s.ToHex(), ClusterSecret::Generate().ToHex());
  const std::string secret_file = dir.File("secret", s.ToHex(), 0600);

  Credential acme = Tenant(s, "acme");
  std::string cred_file = dir.File("cred", "", 0600);
  ASSERT_TRUE(WritePrivateFile(cred_file, FormatCredentialFile(acme)).ok());
  auto loaded = LoadCredential(cred_file, Role::kAdmin, "admin");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->role, Role::kTenant);
  EXPECT_EQ(loaded->principal, "acme");
  EXPECT_EQ(loaded->key, acme.key);

  auto admin = LoadCredential(secret_file, Role::kAdmin, "admin");
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  EXPECT_EQ(admin->role, Role::kAdmin);
  EXPECT_EQ(admin->key, s.RoleKey(Role::kAdmin));
  auto node = LoadCredential(secret_file, Role::kNode, "node-7");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->key, s.RoleKey(Role::kNode));
  EXPECT_EQ(node->principal, "node-7");

  EXPECT_FALSE(
      LoadCredential(dir.File("open", FormatCredentialFile(acme), 0644),
                     Role::kAdmin, "admin")
          .ok());
  EXPECT_FALSE(ParseCredentialFile("role=tenant\nprincipal=a\n").ok());
  EXPECT_FALSE(
      ParseCredentialFile("role=god\nprincipal=a\nkey=" + std::string(64, '0'))
          .ok());
  EXPECT_FALSE(
      ParseCredentialFile("role=tenant\nprincipal=a\nkey=abcd\n").ok());
  EXPECT_FALSE(ParseCredentialFile("role=tenant\nprincipal=a b\nkey=" +
                                   std::string(64, '0'))
                   .ok());
  EXPECT_TRUE(ParseCredentialFile("# made by hand\nrole = admin\n"
                                  "principal=ops\nkey=" +
                                  std::string(64, '0') + "\n")
                  .ok());
  EXPECT_FALSE(MakeCredential(s, Role::kTenant, "caf\xc3\xa9").ok());
}

TEST(AuthTest, WritePrivateFileIsOwnerOnlyWhateverTheUmask) {
  TempDir dir;
  std::string p = dir.File("w", "old", 0644);
  mode_t old_mask = umask(0);
  Status s = WritePrivateFile(p, "new");
  umask(old_mask);
  ASSERT_TRUE(s.ok()) << s.ToString();
  struct stat st;
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream in(p);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "new");
}

}  // namespace
}  // namespace kvpool::auth
