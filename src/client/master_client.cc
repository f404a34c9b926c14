#include "client/master_client.h"

namespace kvpool {

MasterClient::MasterClient(const std::string& address, int timeout_ms)
    : address_(address), timeout_ms_(timeout_ms) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  // Fail fast and retry on the next call rather than queueing behind a
  // reconnect backoff of up to two minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  channel_ = grpc::CreateCustomChannel(
      address, grpc::InsecureChannelCredentials(), args);
  stub_ = rpc::MasterService::NewStub(channel_);
}

}  // namespace kvpool
