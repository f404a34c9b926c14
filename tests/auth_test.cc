// Identity on the control plane (docs/security.md) end to end: a master
// with a cluster secret, nodes and routers that derive their keys from it,
// tenants with their own credentials, and TLS on the gRPC channel.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/auth.h"
#include "kvpool.grpc.pb.h"
#include "kvpool/local_cluster.h"
#include "kvpool/router.h"
#include "master/master_auth.h"
#include "master/master_grpc_service.h"
#include "master/master_server.h"
#include "node/node.h"
#include "rpc/master_client.h"
#include "tests/test_util.h"
#include "tests/tls_test_files.h"

namespace kvpool {
namespace {

constexpr char kService[] = "/kvpool.rpc.MasterService/";

class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "/kvpool_auth_XXXXXX";
    char* p = mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& content) const {
    std::string p = path_ + "/" + name;
    EXPECT_TRUE(auth::WritePrivateFile(p, content).ok());
    return p;
  }

 private:
  std::string path_;
};

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A master (with the secret) and one node, plus credential files.
class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    secret_ = auth::ClusterSecret::Generate();
    secret_file_ = dir_.Write("cluster.secret", secret_.ToHex() + "\n");
    LocalClusterOptions o;
    o.num_nodes = 1;
    o.segment_size = 16 << 20;
    o.cluster_secret_file = secret_file_;
    cluster_ = std::make_unique<LocalCluster>(o);
    Status s = cluster_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::string CredentialFile(auth::Role role, const std::string& principal) {
    auto c = auth::MakeCredential(secret_, role, principal);
    EXPECT_TRUE(c.ok());
    return dir_.Write(principal + ".cred", auth::FormatCredentialFile(*c));
  }

  std::unique_ptr<Client> NewClient(const std::string& tenant,
                                    const std::string& credential_file) {
    ClientConfig c;
    c.tenant = tenant;
    c.credential_file = credential_file;
    c.rpc_timeout_ms = 2000;
    auto r = cluster_->NewClient(c);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r.value()) : nullptr;
  }

  // A bare stub, so a test can send exactly the metadata it wants.
  std::unique_ptr<rpc::MasterService::Stub> Stub() {
    return rpc::MasterService::NewStub(grpc::CreateChannel(
        cluster_->master_address(), grpc::InsecureChannelCredentials()));
  }
  static std::unique_ptr<grpc::ClientContext> Context(
      const std::string& token) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::seconds(5));
    if (!token.empty()) ctx->AddMetadata(auth::kMetadataKey, token);
    return ctx;
  }
  std::string Token(auth::Role role, const std::string& principal,
                    const std::string& method, int64_t issued_ms) {
    auto c = auth::MakeCredential(secret_, role, principal);
    EXPECT_TRUE(c.ok());
    return c->Token(kService + method, issued_ms);
  }

  uint64_t Refused(const std::string& reason) {
    return cluster_->master().service().metrics().CounterValue(
        "kvpool_master_auth_refused_total", "reason=\"" + reason + "\"");
  }

  TempDir dir_;
  auth::ClusterSecret secret_;
  std::string secret_file_;
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(AuthTest, CallWithoutCredentialIsUnauthenticated) {
  const uint64_t before = Refused("unauthenticated");
  rpc::PutStartRequest req;
  req.set_tenant("a");
  req.set_key("k");
  req.set_size(4);
  rpc::PutStartResponse resp;
  grpc::Status s = Stub()->PutStart(Context("").get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Contains(s.error_message(), "missing kvpool-auth credential"))
      << s.error_message();
  EXPECT_EQ(Refused("unauthenticated"), before + 1);

  // The same through the client library: a clear error, not a hang or a
  // "master unreachable".
  auto anonymous = NewClient("a", "");
  Status put = anonymous->Put("k", "data");
  EXPECT_EQ(put.code(), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_TRUE(Contains(put.message(), "missing kvpool-auth credential"))
      << put.ToString();
  auto stat = anonymous->Stat();
  EXPECT_EQ(stat.code(), ErrorCode::ILLEGAL_CLIENT);
}

TEST_F(AuthTest, TenantCredentialCannotTouchAnotherTenant) {
  auto b = NewClient("b", CredentialFile(auth::Role::kTenant, "b"));
  ASSERT_TRUE(b->Put("k1", "value-1").ok());
  ASSERT_TRUE(b->Put("k2", "value-2").ok());

  // Tenant a's credential, pointed at tenant b's keys.
  const std::string a_cred = CredentialFile(auth::Role::kTenant, "a");
  auto intruder = NewClient("b", a_cred);
  const uint64_t before = Refused("permission_denied");
  auto denied = [](const Status& s) {
    EXPECT_TRUE(IsPermissionDenied(s)) << s.ToString();
    EXPECT_TRUE(
        Contains(s.message(), "tenant 'a' credential cannot act on tenant 'b'"))
        << s.ToString();
  };
  denied(intruder->Put("k3", "evil"));
  denied(intruder->Upsert("k1", "evil"));
  denied(intruder->Get("k1").status());
  denied(intruder->IsExist("k1").status());
  denied(intruder->BatchIsExist({"k1", "k2"})[0].status());
  denied(intruder->BatchGetReplicaDesc({"k1"})[0].status());
  denied(intruder->Remove("k1", /*force=*/true));
  denied(intruder->RemoveAll(/*force=*/true).status());
  denied(intruder->RemoveByRegex("k.*", /*force=*/true).status());
  denied(intruder->BatchPrefetchToMemory({"k1"}).status());
  EXPECT_GE(Refused("permission_denied"), before + 10);

  // The default tenant is a tenant like any other.
  auto as_default = NewClient("", a_cred);
  EXPECT_TRUE(IsPermissionDenied(as_default->Put("x", "y")));

  // A batch with one foreign item is refused whole.
  rpc::BatchPutStartRequest batch;
  for (const char* t : {"a", "b"}) {
    auto* item = batch.add_items();
    item->set_tenant(t);
    item->set_key("batch-key");
    item->set_size(4);
  }
  rpc::BatchPutStartResponse batch_resp;
  grpc::Status bs =
      Stub()->BatchPutStart(Context(Token(auth::Role::kTenant, "a",
                                          "BatchPutStart", auth::UnixNowMs()))
                                .get(),
                            batch, &batch_resp);
  EXPECT_EQ(bs.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(batch_resp.items_size(), 0);

  // A tenant pings as itself only (a client with puts in flight).
  for (const char* t : {"b", "a"}) {
    rpc::ClientPingRequest ping;
    ping.set_client_id(std::string(16, '\x05'));
    ping.set_tenant(t);
    rpc::ClientPingResponse pong;
    grpc::Status ps =
        Stub()->ClientPing(Context(Token(auth::Role::kTenant, "a", "ClientPing",
                                         auth::UnixNowMs()))
                               .get(),
                           ping, &pong);
    EXPECT_EQ(ps.error_code(), std::string(t) == "a"
                                   ? grpc::StatusCode::OK
                                   : grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(pong.client_ttl_ms() > 0, std::string(t) == "a");
  }

  // b's keys are intact, and nothing of the intruder's landed.
  auto v1 = b->Get("k1");
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_EQ(v1.value(), "value-1");
  auto v2 = b->Get("k2");
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(v2.value(), "value-2");
  auto k3 = b->IsExist("k3");
  ASSERT_TRUE(k3.ok());
  EXPECT_FALSE(k3.value());
  auto batch_key = b->IsExist("batch-key");
  ASSERT_TRUE(batch_key.ok());
  EXPECT_FALSE(batch_key.value());

  // Its own tenant works (BatchIsExist also covers the nested item check),
  // the cluster's stats do not.
  auto a = NewClient("a", a_cred);
  ASSERT_TRUE(a->Put("mine", "a-value").ok());
  auto mine = a->Get("mine");
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(mine.value(), "a-value");
  auto exist = a->BatchIsExist({"mine", "absent"});
  ASSERT_TRUE(exist[0].ok() && exist[1].ok()) << exist[0].status().ToString();
  EXPECT_TRUE(exist[0].value());
  EXPECT_FALSE(exist[1].value());
  EXPECT_TRUE(IsPermissionDenied(a->Stat().status()));
}

TEST_F(AuthTest, AdminStatsAndRemovesAcrossTenants) {
  auto a = NewClient("a", CredentialFile(auth::Role::kTenant, "a"));
  auto b = NewClient("b", CredentialFile(auth::Role::kTenant, "b"));
  ASSERT_TRUE(a->Put("ka", "1").ok());
  ASSERT_TRUE(b->Put("kb1", "2").ok());
  ASSERT_TRUE(b->Put("kb2", "3").ok());

  // The cluster secret file itself makes a client admin.
  auto admin_b = NewClient("b", secret_file_);
  auto stat = admin_b->Stat();
  ASSERT_TRUE(stat.ok()) << stat.status().ToString();
  EXPECT_EQ(stat->segments.size(), 1u);
  EXPECT_EQ(stat->objects, 3u);
  ASSERT_TRUE(admin_b->Remove("kb1", /*force=*/true).ok());
  auto admin_a = NewClient("a", CredentialFile(auth::Role::kAdmin, "admin"));
  auto removed = admin_a->RemoveAll(/*force=*/true);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(removed.value(), 1u);

  auto ka = a->IsExist("ka");
  ASSERT_TRUE(ka.ok());
  EXPECT_FALSE(ka.value());
  auto kb1 = b->IsExist("kb1");
  ASSERT_TRUE(kb1.ok());
  EXPECT_FALSE(kb1.value());
  auto kb2 = b->Get("kb2");
  ASSERT_TRUE(kb2.ok());
  EXPECT_EQ(kb2.value(), "3");
}

TEST_F(AuthTest, NodeWithoutTheSecretCannotMount) {
  auto start = [&](const std::string& secret_file, const std::string& id) {
    NodeConfig nc;
    nc.master_server_address = cluster_->master_address();
    nc.global_segment_size = 4 << 20;
    nc.node_id = id;
    nc.rpc_timeout_ms = 2000;
    nc.cluster_secret_file = secret_file;
    Node node(nc);
    Status s = node.Start();
    node.Stop();
    return s;
  };
  Status none = start("", "rogue-1");
  EXPECT_EQ(none.code(), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_TRUE(Contains(none.message(), "missing kvpool-auth credential"))
      << none.ToString();

  auto other = auth::ClusterSecret::Generate();
  Status wrong = start(dir_.Write("other.secret", other.ToHex()), "rogue-2");
  EXPECT_EQ(wrong.code(), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_TRUE(Contains(wrong.message(), "bad signature")) << wrong.ToString();

  // A tenant's key is not a node's.
  Status tenant = start(CredentialFile(auth::Role::kTenant, "t"), "rogue-3");
  EXPECT_TRUE(IsPermissionDenied(tenant)) << tenant.ToString();
  EXPECT_TRUE(Contains(tenant.message(), "may not call MountSegment"));

  auto admin = NewClient("default", secret_file_);
  auto stat = admin->Stat();
  ASSERT_TRUE(stat.ok());
  ASSERT_EQ(stat->segments.size(), 1u);
  EXPECT_EQ(stat->segments[0].node_id, "node0");

  // With the secret it mounts (as the cluster's own node did).
  EXPECT_TRUE(start(secret_file_, "honest").ok());
}

TEST_F(AuthTest, ForgedExpiredAndMisdirectedTokensAreRefused) {
  auto stub = Stub();
  rpc::ExistKeyRequest req;
  req.set_tenant("b");
  req.add_keys("k");
  const int64_t now = auth::UnixNowMs();
  auto exist = [&](const std::string& token) {
    rpc::ExistKeyResponse resp;
    return stub->ExistKey(Context(token).get(), req, &resp);
  };

  ASSERT_TRUE(exist(Token(auth::Role::kTenant, "b", "ExistKey", now)).ok());

  // Right name, key of another cluster.
  auto forged = auth::MakeCredential(auth::ClusterSecret::Generate(),
                                     auth::Role::kTenant, "b");
  grpc::Status f =
      exist(forged->Token(std::string(kService) + "ExistKey", now));
  EXPECT_EQ(f.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Contains(f.error_message(), "bad signature"));

  grpc::Status old = exist(Token(auth::Role::kTenant, "b", "ExistKey",
                                 now - auth::kDefaultMaxClockSkewMs - 60000));
  EXPECT_EQ(old.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Contains(old.error_message(), "token too old"))
      << old.error_message();
  EXPECT_TRUE(Contains(old.error_message(), "check clocks"));

  grpc::Status future =
      exist(Token(auth::Role::kTenant, "b", "ExistKey",
                  now + auth::kDefaultMaxClockSkewMs + 60000));
  EXPECT_EQ(future.error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // A token signed for another RPC, fresh or already used once.
  grpc::Status other =
      exist(Token(auth::Role::kTenant, "b", "Remove", auth::UnixNowMs()));
  EXPECT_EQ(other.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const std::string used =
      Token(auth::Role::kTenant, "b", "ExistKey", auth::UnixNowMs());
  ASSERT_TRUE(exist(used).ok());
  rpc::RemoveRequest rm;
  rm.set_tenant("b");
  rm.set_key("k");
  rpc::KeyStatus rm_resp;
  grpc::Status replayed = stub->Remove(Context(used).get(), rm, &rm_resp);
  EXPECT_EQ(replayed.error_code(), grpc::StatusCode::UNAUTHENTICATED);

  grpc::Status garbage = exist("v1:tenant:b:12:nothex");
  EXPECT_EQ(garbage.error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(AuthTest, RolesReachExactlyTheirRpcs) {
  auto stub = Stub();
  const int64_t now = auth::UnixNowMs();
  auto ctx = [&](auth::Role r, const char* method) {
    return Context(Token(r, auth::RoleName(r), method, now));
  };
  rpc::BatchKeyRequest query;
  query.set_tenant("any-tenant");
  query.add_keys("k");
  rpc::BatchQueryReadOnlyResponse qr;
  EXPECT_TRUE(
      stub->BatchQueryReadOnly(
              ctx(auth::Role::kRouter, "BatchQueryReadOnly").get(), query, &qr)
          .ok());
  rpc::ClusterStatsResponse stats;
  EXPECT_TRUE(
      stub->GetClusterStats(ctx(auth::Role::kRouter, "GetClusterStats").get(),
                            rpc::ClusterStatsRequest(), &stats)
          .ok());
  rpc::PutStartRequest put;
  put.set_tenant("any-tenant");
  put.set_key("k");
  put.set_size(4);
  rpc::PutStartResponse pr;
  EXPECT_EQ(stub->PutStart(ctx(auth::Role::kRouter, "PutStart").get(), put, &pr)
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(stub->PutStart(ctx(auth::Role::kNode, "PutStart").get(), put, &pr)
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  rpc::HeartbeatRequest hb;
  hb.set_node_id("node0");
  rpc::HeartbeatResponse hr;
  EXPECT_EQ(
      stub->Heartbeat(ctx(auth::Role::kRouter, "Heartbeat").get(), hb, &hr)
          .error_code(),
      grpc::StatusCode::PERMISSION_DENIED);

  // The batch promotion RPCs run their item handler per item: one token of
  // the batch RPC covers them (the items' own answers are errors, the call
  // is not refused).
  rpc::BatchPromotionAllocStartRequest alloc;
  auto* item = alloc.add_items();
  item->set_node_id("node0");
  item->set_tenant("t");
  item->set_key("not-on-ssd");
  item->set_size(4);
  alloc.add_items()->CopyFrom(*item);
  rpc::BatchPromotionAllocStartResponse ar;
  grpc::Status as = stub->BatchPromotionAllocStart(
      ctx(auth::Role::kNode, "BatchPromotionAllocStart").get(), alloc, &ar);
  ASSERT_TRUE(as.ok()) << as.error_message();
  ASSERT_EQ(ar.items_size(), 2);
  EXPECT_NE(ar.items(0).error_code(), 0);
  rpc::BatchPromotionNotifyRequest notify;
  notify.add_items()->set_node_id("node0");
  rpc::BatchPromotionNotifyResponse nr;
  EXPECT_TRUE(
      stub->BatchPromotionNotify(
              ctx(auth::Role::kNode, "BatchPromotionNotify").get(), notify, &nr)
          .ok());
  // ...but a tenant cannot call them at all.
  EXPECT_EQ(stub->BatchPromotionAllocStart(
                    ctx(auth::Role::kTenant, "BatchPromotionAllocStart").get(),
                    alloc, &ar)
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

// The master verifies a token's MAC once and then finds it in its cache;
// rights and freshness are still checked on every call.
TEST_F(AuthTest, RepeatedCallsFindTheirTokenVerified) {
  auto stub = Stub();
  rpc::ExistKeyRequest req;
  req.set_tenant("b");
  req.add_keys("k");
  auto exist = [&](const std::string& token) {
    rpc::ExistKeyResponse resp;
    return stub->ExistKey(Context(token).get(), req, &resp);
  };
  auto cache = [&](const char* result) {
    return cluster_->master().service().metrics().CounterValue(
        "kvpool_master_auth_token_cache_total",
        std::string("result=\"") + result + "\"");
  };
  const uint64_t hits_before = cache("hit");
  const uint64_t misses_before = cache("miss");
  const std::string token =
      Token(auth::Role::kTenant, "b", "ExistKey", auth::UnixNowMs());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(exist(token).ok()) << i;
  // The node's own calls may add to both counters meanwhile.
  EXPECT_GE(cache("hit") - hits_before, 19u);
  EXPECT_GE(cache("miss") - misses_before, 1u);

  // A cached token is still refused for another tenant's keys, and for an
  // RPC it was not signed for.
  rpc::ExistKeyRequest other = req;
  other.set_tenant("a");
  rpc::ExistKeyResponse resp;
  EXPECT_EQ(stub->ExistKey(Context(token).get(), other, &resp).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  rpc::RemoveRequest rm;
  rm.set_tenant("b");
  rm.set_key("k");
  rpc::KeyStatus rm_resp;
  EXPECT_EQ(stub->Remove(Context(token).get(), rm, &rm_resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  // And it still ages out: one issued 1.5 s short of the skew limit works
  // now (and is cached), and is refused once it is past the limit.
  const std::string aging =
      Token(auth::Role::kTenant, "b", "ExistKey",
            auth::UnixNowMs() - auth::kDefaultMaxClockSkewMs + 1500);
  ASSERT_TRUE(exist(aging).ok());
  grpc::Status last;
  EXPECT_TRUE(kvpool::testing::WaitUntil(
      [&] {
        last = exist(aging);
        return !last.ok();
      },
      std::chrono::seconds(10)));
  EXPECT_EQ(last.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Contains(last.error_message(), "token too old"))
      << last.error_message();
}

// The token moves from the metadata into the request (auth_token) once the
// master has said that it reads it there (docs/security.md, "Tokens"); the
// checks are the same either way.
TEST_F(AuthTest, TokensMoveIntoTheRequestOnceTheMasterSaysItReadsThem) {
  auto stub = Stub();
  rpc::ExistKeyRequest req;
  req.set_tenant("b");
  req.add_keys("k");
  auto says_body = [](const grpc::ClientContext& ctx) {
    return ctx.GetServerInitialMetadata().count(auth::kBodyTokenHeader) > 0;
  };
  const std::string token =
      Token(auth::Role::kTenant, "b", "ExistKey", auth::UnixNowMs());
  {
    auto ctx = Context(token);
    rpc::ExistKeyResponse resp;
    ASSERT_TRUE(stub->ExistKey(ctx.get(), req, &resp).ok());
    EXPECT_TRUE(says_body(*ctx));
  }
  auto exist_in_body = [&](const std::string& body_token,
                           const std::string& tenant = "b") {
    rpc::ExistKeyRequest r = req;
    r.set_tenant(tenant);
    r.set_auth_token(body_token);
    auto ctx = Context("");
    rpc::ExistKeyResponse resp;
    grpc::Status s = stub->ExistKey(ctx.get(), r, &resp);
    if (s.ok()) {
      EXPECT_FALSE(says_body(*ctx));  // it needs no telling
    }
    return s;
  };
  EXPECT_TRUE(exist_in_body(token).ok());
  grpc::Status other_tenant = exist_in_body(token, "a");
  EXPECT_EQ(other_tenant.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  auto forged = auth::MakeCredential(auth::ClusterSecret::Generate(),
                                     auth::Role::kTenant, "b");
  grpc::Status f = exist_in_body(
      forged->Token(std::string(kService) + "ExistKey", auth::UnixNowMs()));
  EXPECT_EQ(f.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Contains(f.error_message(), "bad signature"))
      << f.error_message();
  grpc::Status misdirected = exist_in_body(
      Token(auth::Role::kTenant, "b", "Remove", auth::UnixNowMs()));
  EXPECT_EQ(misdirected.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status stale = exist_in_body(
      Token(auth::Role::kTenant, "b", "ExistKey",
            auth::UnixNowMs() - auth::kDefaultMaxClockSkewMs - 60000));
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // A good token in the metadata does not make up for a bad one in the
  // request: the request's is the one checked.
  {
    rpc::ExistKeyRequest r = req;
    r.set_auth_token(
        forged->Token(std::string(kService) + "ExistKey", auth::UnixNowMs()));
    rpc::ExistKeyResponse resp;
    EXPECT_EQ(stub->ExistKey(Context(token).get(), r, &resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }

  // Through the client library: after its first call, a client's tokens
  // ride in its requests.
  auto carried = [&](const char* carrier) {
    return cluster_->master().service().metrics().CounterValue(
        "kvpool_master_auth_token_carrier_total",
        std::string("carrier=\"") + carrier + "\"");
  };
  auto b = NewClient("b", CredentialFile(auth::Role::kTenant, "b"));
  const uint64_t in_request = carried("request");
  const uint64_t in_metadata = carried("metadata");
  constexpr int kCalls = 20;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(b->Put("k" + std::to_string(i), "value").ok()) << i;
  }
  // Two RPCs per put; the node's own calls may add to either counter.
  EXPECT_GE(carried("request") - in_request, uint64_t(2 * kCalls - 1));
  EXPECT_LE(carried("metadata") - in_metadata, uint64_t(kCalls / 2));
}

// A master from before auth_token (simulated: this one stops reading it)
// refuses a call whose token is in the request as having none; the client
// goes back to the metadata and makes the call again, so no call of its
// fails. Each master client is refused once at most (this test's, and the
// node's own when it calls meanwhile).
TEST_F(AuthTest, AClientGoesBackToTheMetadataForAMasterThatIgnoresItsRequest) {
  auto b = NewClient("b", CredentialFile(auth::Role::kTenant, "b"));
  ASSERT_TRUE(b->Put("k0", "v0").ok());  // the master says: in the request
  ASSERT_TRUE(b->Put("k1", "v1").ok());
  RpcAuthorizer* authorizer = cluster_->master().grpc_service().authorizer();
  ASSERT_NE(authorizer, nullptr);
  authorizer->set_reads_body_token(false);
  const uint64_t refused = Refused("unauthenticated");
  auto got = b->Get("k1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "v1");
  for (int i = 2; i < 8; ++i)
    ASSERT_TRUE(b->Put("k" + std::to_string(i), "v").ok()) << i;
  const uint64_t refusals = Refused("unauthenticated") - refused;
  EXPECT_GE(refusals, 1u);
  EXPECT_LE(refusals, 3u);
  // And into the request again once the master says so once more.
  authorizer->set_reads_body_token(true);
  auto in_request = [&] {
    return cluster_->master().service().metrics().CounterValue(
        "kvpool_master_auth_token_carrier_total", "carrier=\"request\"");
  };
  ASSERT_TRUE(b->Put("k8", "v").ok());
  const uint64_t before = in_request();
  ASSERT_TRUE(b->Put("k9", "v").ok());
  EXPECT_GE(in_request(), before + 2);
  EXPECT_EQ(Refused("unauthenticated") - refused, refusals);
}

TEST(VerifiedTokenCacheTest, FindsWhatItRemembersAndStaysBounded) {
  constexpr size_t kCapacity = 64;
  VerifiedTokenCache cache(/*max_age_ms=*/1000, kCapacity);
  VerifiedTokenCache::Entry e{RpcMethod::kExistKey, auth::Role::kTenant, 3, 1,
                              0};
  VerifiedTokenCache::Entry got{};
  EXPECT_FALSE(cache.Find("never", &got));
  // Fresh tokens, far more than it holds: the newest is always there.
  for (int i = 0; i < 10000; ++i) {
    const std::string token = "token-" + std::to_string(i);
    e.issued_ms = 5000;
    cache.Remember(token, e, /*now_ms=*/5000);
    ASSERT_TRUE(cache.Find(token, &got)) << i;
    EXPECT_EQ(got.method, RpcMethod::kExistKey);
    EXPECT_EQ(got.principal_offset, 3u);
    ASSERT_LE(cache.size(), kCapacity) << i;
  }
}

// A new RPC needs a rule (and a check in its handler) before it can ship.
TEST(AuthRulesTest, EveryRpcOfTheServiceHasARule) {
  const auto* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          "kvpool.rpc.MasterService");
  ASSERT_NE(service, nullptr);
  ASSERT_EQ(service->method_count(), static_cast<int>(RpcMethod::kNumMethods));
  std::set<std::string> names;
  for (int i = 0; i < static_cast<int>(RpcMethod::kNumMethods); ++i)
    names.insert(RpcMethodName(static_cast<RpcMethod>(i)));
  for (int i = 0; i < service->method_count(); ++i) {
    EXPECT_EQ(
        names.count("/kvpool.rpc.MasterService/" + service->method(i)->name()),
        1u)
        << service->method(i)->name();
  }
  EXPECT_FALSE(RoleMayCall(auth::Role::kTenant, RpcMethod::kGetClusterStats));
  EXPECT_FALSE(RoleMayCall(auth::Role::kTenant, RpcMethod::kMountSegment));
  EXPECT_FALSE(RoleMayCall(auth::Role::kRouter, RpcMethod::kRemove));
  EXPECT_TRUE(RoleMayCall(auth::Role::kAdmin, RpcMethod::kUnmountSegment));
}

TEST_F(AuthTest, RouterWithTheSecretLooksUpAnyTenant) {
  auto b = NewClient("b", CredentialFile(auth::Role::kTenant, "b"));
  ASSERT_TRUE(b->Put("block-0", "x").ok());
  ASSERT_TRUE(b->Put("block-1", "y").ok());
  RouterConfig rc;
  rc.master_server_address = cluster_->master_address();
  rc.cluster_secret_file = secret_file_;
  auto router = Router::Create(rc);
  ASSERT_TRUE(router.ok()) << router.status().ToString();
  RouteRequest req;
  req.tenant = "b";
  req.block_keys = {"block-0", "block-1", "block-2"};
  auto d = router.value()->Route(req);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->matched_prefix, 2u);

  RouterConfig anonymous = rc;
  anonymous.cluster_secret_file.clear();
  auto blind = Router::Create(anonymous);
  ASSERT_TRUE(blind.ok());
  auto refused = blind.value()->Route(req);
  EXPECT_FALSE(refused.ok());

  RouterConfig unreadable = rc;
  unreadable.cluster_secret_file = dir_.path() + "/missing";
  EXPECT_FALSE(Router::Create(unreadable).ok());
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tls_ = std::make_unique<TlsTestFiles>();
    if (!tls_->ok()) GTEST_SKIP() << "the openssl command line failed";
    secret_ = auth::ClusterSecret::Generate();
    secret_file_ = dir_.Write("cluster.secret", secret_.ToHex());
  }
  void StartMaster(bool require_client_certs) {
    MasterConfig mc;
    mc.rpc_port = 0;
    mc.metrics_port = -1;
    mc.cluster_secret_file = secret_file_;
    mc.tls_cert_file = (*tls_)("server.pem");
    mc.tls_key_file = (*tls_)("server.key");
    if (require_client_certs) mc.tls_ca_file = (*tls_)("ca.pem");
    master_ = std::make_unique<MasterServer>(mc);
    Status s = master_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    NodeConfig nc;
    nc.master_server_address = master_->address();
    nc.global_segment_size = 4 << 20;
    nc.node_id = "tls-node";
    nc.cluster_secret_file = secret_file_;
    nc.tls_ca_file = (*tls_)("ca.pem");
    if (require_client_certs) {
      nc.tls_cert_file = (*tls_)("client.pem");
      nc.tls_key_file = (*tls_)("client.key");
    }
    node_ = std::make_unique<Node>(nc);
    s = node_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void TearDown() override {
    if (node_) node_->Stop();
    if (master_) master_->Stop();
  }
  Result<std::unique_ptr<Client>> NewClient(bool tls, bool client_cert) {
    ClientConfig c;
    c.master_server_address = master_->address();
    c.tenant = "t";
    c.rpc_timeout_ms = 1000;
    auto cred = auth::MakeCredential(secret_, auth::Role::kTenant, "t");
    c.credential_file =
        dir_.Write("t.cred", auth::FormatCredentialFile(cred.value()));
    if (tls) c.tls_ca_file = (*tls_)("ca.pem");
    if (client_cert) {
      c.tls_cert_file = (*tls_)("client.pem");
      c.tls_key_file = (*tls_)("client.key");
    }
    return Client::Create(c);
  }

  TempDir dir_;
  std::unique_ptr<TlsTestFiles> tls_;
  auth::ClusterSecret secret_;
  std::string secret_file_;
  std::unique_ptr<MasterServer> master_;
  std::unique_ptr<Node> node_;
};

TEST_F(TlsTest, ClientWithTheCaTalksTlsAndPlaintextFails) {
  StartMaster(/*require_client_certs=*/false);
  auto tls = NewClient(/*tls=*/true, /*client_cert=*/false);
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  Status put = tls.value()->Put("over-tls", "secret bytes");
  ASSERT_TRUE(put.ok()) << put.ToString();
  auto got = tls.value()->Get("over-tls");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value(), "secret bytes");

  auto plain = NewClient(/*tls=*/false, /*client_cert=*/false);
  ASSERT_TRUE(plain.ok());
  Status refused = plain.value()->Put("plaintext", "x");
  EXPECT_EQ(refused.code(), ErrorCode::RPC_FAIL) << refused.ToString();
  auto exist = tls.value()->IsExist("plaintext");
  ASSERT_TRUE(exist.ok());
  EXPECT_FALSE(exist.value());
}

TEST_F(TlsTest, MasterWithACaRequiresClientCertificates) {
  StartMaster(/*require_client_certs=*/true);
  auto with_cert = NewClient(/*tls=*/true, /*client_cert=*/true);
  ASSERT_TRUE(with_cert.ok()) << with_cert.status().ToString();
  ASSERT_TRUE(with_cert.value()->Put("k", "v").ok());
  auto without = NewClient(/*tls=*/true, /*client_cert=*/false);
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE(without.value()->Put("k2", "v").ok());
}

}  // namespace
}  // namespace kvpool
