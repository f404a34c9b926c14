// The identity check every new connection of the TCP data client starts
// with: the client names the node it expects in a HELLO, and the server
// answers with its own node id or a refusal (docs/data_plane.md). A port
// that now belongs to another node, another process or another protocol
// fails the call instead of serving it. Internal to the data client.
#ifndef KVPOOL_TRANSPORT_TCP_DATA_CLIENT_HELLO_H_
#define KVPOOL_TRANSPORT_TCP_DATA_CLIENT_HELLO_H_

#include <chrono>
#include <string>
#include <string_view>

#include "kvpool/status.h"
#include "transport/tcp_data_client_link.h"

namespace kvpool::data_client {

// The HELLO exchange on a freshly connected, non-blocking connection,
// bounded as a whole by `timeout`. OK only if the server is `node_id`;
// otherwise TRANSFER_FAIL saying what answered instead.
Status ExchangeHello(const Link& link, const std::string& endpoint,
                     const std::string& node_id,
                     std::chrono::milliseconds timeout);

// INVALID_PARAMS unless `node_id` has a length a HELLO can carry.
Status CheckNodeId(const std::string& node_id);

// For quoting a node id in a message: a peer's answer may hold any bytes.
std::string Printable(std::string_view s);

}  // namespace kvpool::data_client

#endif  // KVPOOL_TRANSPORT_TCP_DATA_CLIENT_HELLO_H_
