#include "ha/etcd_client.h"

#include <httplib.h>
#include <openssl/evp.h>

#include <nlohmann/json.hpp>

namespace kvpool::ha {

namespace {

using nlohmann::json;

std::string Base64(std::string_view in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(in.data()),
                      static_cast<int>(in.size()));
  out.resize(n);
  return out;
}

bool Unbase64(std::string_view in, std::string* out) {
  if (in.size() % 4 != 0) return false;
  out->assign(3 * in.size() / 4 + 1, '\0');
  const int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out->data()),
                      reinterpret_cast<const unsigned char*>(in.data()),
                      static_cast<int>(in.size()));
  if (n < 0) return false;
  // EVP_DecodeBlock counts the bytes '=' padding stands for.
  size_t len = static_cast<size_t>(n);
  if (!in.empty() && in.back() == '=') --len;
  if (in.size() >= 2 && in[in.size() - 2] == '=') --len;
  out->resize(len);
  return true;
}

// The gateway writes int64 fields as JSON strings ("123") and leaves out
// fields that are zero.
int64_t Int(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end()) return 0;
  if (it->is_string()) return std::stoll(it->get<std::string>());
  if (it->is_number_integer()) return it->get<int64_t>();
  return 0;
}

Result<KeyValue> ParseKv(const json& j) {
  KeyValue kv;
  if (!Unbase64(j.value("key", ""), &kv.key) ||
      !Unbase64(j.value("value", ""), &kv.value)) {
    return Status(ErrorCode::RPC_FAIL, "etcd: bad base64 in a key-value");
  }
  kv.create_revision = Int(j, "create_revision");
  kv.mod_revision = Int(j, "mod_revision");
  kv.lease = Int(j, "lease");
  return kv;
}

Result<json> ParseReply(const Result<std::string>& body) {
  if (!body.ok()) return body.status();
  json j = json::parse(body.value(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status(ErrorCode::RPC_FAIL, "etcd: reply is not JSON");
  }
  if (j.contains("error")) {
    return Status(ErrorCode::RPC_FAIL,
                  "etcd: " + j.value("message", j["error"].dump()));
  }
  return j;
}

}  // namespace

Result<std::vector<std::string>> ParseEndpoints(std::string_view list) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find_first_of(",;", pos);
    if (end == std::string_view::npos) end = list.size();
    std::string_view e = list.substr(pos, end - pos);
    while (!e.empty() && e.front() == ' ') e.remove_prefix(1);
    while (!e.empty() && e.back() == ' ') e.remove_suffix(1);
    if (e.rfind("https://", 0) == 0) {
      return Status(ErrorCode::INVALID_PARAMS,
                    "etcd endpoint " + std::string(e) +
                        ": https is not supported (plain http only)");
    }
    if (e.rfind("http://", 0) == 0) e.remove_prefix(7);
    if (!e.empty() && e.back() == '/') e.remove_suffix(1);
    if (!e.empty()) {
      const size_t colon = e.rfind(':');
      if (colon == std::string_view::npos || colon + 1 == e.size() ||
          e.find_first_not_of("0123456789", colon + 1) !=
              std::string_view::npos) {
        return Status(
            ErrorCode::INVALID_PARAMS,
            "etcd endpoint " + std::string(e) + ": expected host:port");
      }
      out.emplace_back(e);
    }
    pos = end + 1;
  }
  if (out.empty()) {
    return Status(ErrorCode::INVALID_PARAMS, "no etcd endpoint given");
  }
  return out;
}

EtcdClient::EtcdClient(std::vector<std::string> endpoints, int timeout_ms)
    : endpoints_(std::move(endpoints)), timeout_ms_(timeout_ms) {}

Result<std::string> EtcdClient::Post(const std::string& path,
                                     const std::string& body) {
  if (endpoints_.empty()) {
    return Status(ErrorCode::INVALID_PARAMS, "no etcd endpoint");
  }
  std::string errors;
  const size_t first = preferred_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const size_t idx = (first + i) % endpoints_.size();
    // A client per call: etcd calls are rare (a few a second), and a fresh
    // connection never carries a socket a partition left half-open.
    httplib::Client cli("http://" + endpoints_[idx]);
    const time_t sec = timeout_ms_ / 1000;
    const time_t usec = (timeout_ms_ % 1000) * 1000;
    cli.set_connection_timeout(sec, usec);
    cli.set_read_timeout(sec, usec);
    cli.set_write_timeout(sec, usec);
    auto res = cli.Post(path.c_str(), body, "application/json");
    if (res) {
      preferred_.store(idx, std::memory_order_relaxed);
      // A 4xx/5xx still carries the gateway's JSON error.
      return std::move(res->body);
    }
    if (!errors.empty()) errors += "; ";
    errors += endpoints_[idx] + ": " + httplib::to_string(res.error());
  }
  return Status(ErrorCode::RPC_FAIL, "etcd unreachable (" + errors + ")");
}

Result<LeaseGrant> EtcdClient::GrantLease(int64_t ttl_s) {
  auto j = ParseReply(
      Post("/v3/lease/grant", json{{"TTL", std::to_string(ttl_s)}}.dump()));
  if (!j.ok()) return j.status();
  LeaseGrant g{Int(j.value(), "ID"), Int(j.value(), "TTL")};
  if (g.id == 0 || g.ttl_s <= 0) {
    return Status(ErrorCode::RPC_FAIL, "etcd granted no lease");
  }
  return g;
}

Result<int64_t> EtcdClient::KeepAlive(int64_t lease_id) {
  auto j = ParseReply(Post("/v3/lease/keepalive",
                           json{{"ID", std::to_string(lease_id)}}.dump()));
  if (!j.ok()) return j.status();
  auto it = j.value().find("result");
  if (it == j.value().end() || !it->is_object()) {
    return Status(ErrorCode::RPC_FAIL, "etcd: keepalive without a result");
  }
  const int64_t ttl = Int(*it, "TTL");
  if (ttl <= 0) {
    return Status(ErrorCode::OBJECT_NOT_FOUND,
                  "etcd lease " + std::to_string(lease_id) + " expired");
  }
  return ttl;
}

Status EtcdClient::Revoke(int64_t lease_id) {
  auto j = ParseReply(
      Post("/v3/lease/revoke", json{{"ID", std::to_string(lease_id)}}.dump()));
  return j.ok() ? Status::OK() : j.status();
}

Result<CreateResult> EtcdClient::CreateIfAbsent(const std::string& key,
                                                const std::string& value,
                                                int64_t lease_id) {
  const std::string k = Base64(key);
  json put = {{"key", k}, {"value", Base64(value)}};
  if (lease_id != 0) put["lease"] = std::to_string(lease_id);
  json txn = {
      {"compare",
       json::array(
           {{{"key", k}, {"target", "CREATE"}, {"create_revision", "0"}}})},
      {"success", json::array({{{"request_put", put}}})},
      {"failure", json::array({{{"request_range", {{"key", k}}}}})}};
  auto j = ParseReply(Post("/v3/kv/txn", txn.dump()));
  if (!j.ok()) return j.status();
  CreateResult out;
  out.created = j.value().value("succeeded", false);
  if (out.created) {
    out.revision = Int(j.value().value("header", json::object()), "revision");
    return out;
  }
  // The failure branch's range: the key as it stands (gone again by now
  // if its lease ended in between, then nullopt).
  for (const auto& r : j.value().value("responses", json::array())) {
    const json range = r.value("response_range", json::object());
    for (const auto& kv : range.value("kvs", json::array())) {
      auto parsed = ParseKv(kv);
      if (!parsed.ok()) return parsed.status();
      out.existing = std::move(parsed.value());
    }
  }
  return out;
}

Result<std::optional<KeyValue>> EtcdClient::Get(const std::string& key) {
  auto j = ParseReply(Post("/v3/kv/range", json{{"key", Base64(key)}}.dump()));
  if (!j.ok()) return j.status();
  for (const auto& kv : j.value().value("kvs", json::array())) {
    auto parsed = ParseKv(kv);
    if (!parsed.ok()) return parsed.status();
    return std::optional<KeyValue>(std::move(parsed.value()));
  }
  return std::optional<KeyValue>();
}

Status EtcdClient::Put(const std::string& key, const std::string& value) {
  auto j = ParseReply(
      Post("/v3/kv/put",
           json{{"key", Base64(key)}, {"value", Base64(value)}}.dump()));
  return j.ok() ? Status::OK() : j.status();
}

Status EtcdClient::Delete(const std::string& key) {
  auto j =
      ParseReply(Post("/v3/kv/deleterange", json{{"key", Base64(key)}}.dump()));
  return j.ok() ? Status::OK() : j.status();
}

}  // namespace kvpool::ha
