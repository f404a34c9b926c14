#include "rpc/master_client.h"

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace kvpool {
namespace {

// A token is signed for the RPC's full name; an RPC missing from the list
// would fail every call with a credential.
TEST(MasterClientTest, EveryRpcOfTheServiceHasItsName) {
  // Naming a message of the proto links its generated file, whose static
  // initializer registers the service: this binary would otherwise use
  // nothing else of it.
  ASSERT_NE(rpc::PutStartRequest::descriptor(), nullptr);
  const auto* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          rpc::MasterService::service_full_name());
  ASSERT_NE(service, nullptr);
  std::set<std::string> listed;
#define KVPOOL_LIST_RPC(name) listed.insert(#name);
  KVPOOL_MASTER_RPCS(KVPOOL_LIST_RPC)
#undef KVPOOL_LIST_RPC
  ASSERT_EQ(listed.size(), static_cast<size_t>(service->method_count()));
  for (int i = 0; i < service->method_count(); ++i) {
    EXPECT_TRUE(listed.count(service->method(i)->name()))
        << service->method(i)->name();
  }
  EXPECT_STREQ(MasterMethodName(&rpc::MasterService::Stub::PutStart),
               "/kvpool.rpc.MasterService/PutStart");
  // Same signature, different RPCs: told apart.
  EXPECT_STREQ(MasterMethodName(&rpc::MasterService::Stub::PutEnd),
               "/kvpool.rpc.MasterService/PutEnd");
  EXPECT_STREQ(MasterMethodName(&rpc::MasterService::Stub::PutRevoke),
               "/kvpool.rpc.MasterService/PutRevoke");
}

}  // namespace
}  // namespace kvpool
