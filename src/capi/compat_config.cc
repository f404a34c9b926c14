#include "capi/compat_config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

namespace kvpool::compat {

Result<ReplicateConfig> ToReplicateConfig(const MooncakeReplicateConfig& rc) {
  if (rc.replica_num < 1 || rc.replica_num > 64) {
    return Status(ErrorCode::INVALID_PARAMS, "replica_num must be in [1, 64]");
  }
  ReplicateConfig out;
  out.replica_num = static_cast<int>(rc.replica_num);
  out.preferred_segment = rc.preferred_segment;
  out.preferred_segments = rc.preferred_segments;
  out.with_hard_pin = rc.with_hard_pin;
  switch (rc.soft_pin_action) {
    case SoftPinAction::kEnable:
      out.with_soft_pin = true;
      break;
    case SoftPinAction::kDisable:
      out.with_soft_pin = false;
      break;
    case SoftPinAction::kPreserve:
      out.with_soft_pin = rc.with_soft_pin;
      break;
  }
  if (rc.soft_pin_ttl_ms) {
    // As Mooncake: a TTL is a property of a soft pin, and one without it is
    // a caller's mistake rather than something to ignore.
    if (!out.with_soft_pin) {
      return Status(ErrorCode::INVALID_PARAMS,
                    "soft_pin_ttl_ms is set but the put takes no soft pin");
    }
    if (*rc.soft_pin_ttl_ms == 0) out.with_soft_pin = false;
    out.soft_pin_ttl_ms = static_cast<int64_t>(std::min<uint64_t>(
        *rc.soft_pin_ttl_ms, std::numeric_limits<int64_t>::max()));
  }
  return out;
}

Status SetupConfig::Validate() const {
  auto bad = [](const std::string& m) {
    return Status(ErrorCode::INVALID_PARAMS, m);
  };
  if (local_hostname.empty()) return bad("local_hostname is required");
  if (master_server_addr.empty()) return bad("master_server_addr is required");
  if (rpc_timeout_ms <= 0) return bad("rpc_timeout_ms must be > 0");
  if (data_connect_timeout_ms <= 0 || data_connect_timeout_ms > 3600000 ||
      data_io_timeout_ms <= 0 || data_io_timeout_ms > 3600000)
    return bad(
        "data_connect_timeout_ms and data_io_timeout_ms must be in "
        "(0, 3600000]");
  if (heartbeat_interval_ms <= 0)
    return bad("heartbeat_interval_ms must be > 0");
  if (enable_ssd_offload && ssd_offload_path.empty())
    return bad("enable_ssd_offload needs ssd_offload_path");
  return Status::OK();
}

namespace {

std::string Trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

Result<uint64_t> ParseMooncakeSize(const std::string& text) {
  const std::string t = Trim(text);
  auto bad = [&] {
    return Status(ErrorCode::INVALID_PARAMS, "not a size: '" + text + "'");
  };
  size_t i = 0;
  while (i < t.size() &&
         (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) {
    ++i;
  }
  if (i == 0) return bad();
  std::string unit = Trim(t.substr(i));
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  int shift = -1;
  if (unit.empty() || unit == "B") {
    shift = 0;
  } else if (unit == "K" || unit == "KB" || unit == "KIB") {
    shift = 10;
  } else if (unit == "M" || unit == "MB" || unit == "MIB") {
    shift = 20;
  } else if (unit == "G" || unit == "GB" || unit == "GIB") {
    shift = 30;
  } else if (unit == "T" || unit == "TB" || unit == "TIB") {
    shift = 40;
  }
  if (shift < 0) return bad();
  const std::string number = t.substr(0, i);
  if (number.find('.') == std::string::npos) {
    uint64_t n = 0;
    auto [end, ec] =
        std::from_chars(number.data(), number.data() + number.size(), n);
    if (ec != std::errc() || end != number.data() + number.size() ||
        (shift > 0 && n > (std::numeric_limits<uint64_t>::max() >> shift))) {
      return bad();
    }
    return n << shift;
  }
  double d = 0;
  auto [end, ec] =
      std::from_chars(number.data(), number.data() + number.size(), d);
  if (ec != std::errc() || end != number.data() + number.size()) return bad();
  const double bytes = std::floor(std::ldexp(d, shift));
  if (!(bytes >= 0) || bytes >= 18446744073709551616.0) return bad();
  return static_cast<uint64_t>(bytes);
}

namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return s;
}

Status ParseBool(const std::string& key, const std::string& v, bool* out) {
  std::string l = Lower(v);
  if (l == "true" || l == "1" || l == "yes" || l == "on") {
    *out = true;
  } else if (l == "false" || l == "0" || l == "no" || l == "off") {
    *out = false;
  } else {
    return Status(ErrorCode::INVALID_PARAMS,
                  key + ": not a boolean: '" + v + "'");
  }
  return Status::OK();
}

Status ParseInt(const std::string& key, const std::string& v, int64_t* out) {
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
  if (ec != std::errc() || end != v.data() + v.size()) {
    return Status(ErrorCode::INVALID_PARAMS,
                  key + ": not an integer: '" + v + "'");
  }
  return Status::OK();
}

Status ParseSizeKey(const std::string& key, const std::string& v,
                    uint64_t* out) {
  auto r = ParseMooncakeSize(v);
  if (!r.ok()) return Status(ErrorCode::INVALID_PARAMS, key + ": " + v);
  *out = r.value();
  return Status::OK();
}

}  // namespace

Result<SetupConfig> SetupConfigFromDict(
    const std::map<std::string, std::string>& dict) {
  SetupConfig c;
  // Mooncake requires local_hostname and metadata_server; kvpool has no
  // use for the latter, so only the former is required.
  if (!dict.count("local_hostname")) {
    return Status(ErrorCode::INVALID_PARAMS, "local_hostname is required");
  }
  for (const auto& [key, v] : dict) {
    Status s;
    int64_t n = 0;
    if (key == "local_hostname") {
      c.local_hostname = v;
    } else if (key == "metadata_server") {
      c.metadata_server = v;
    } else if (key == "global_segment_size") {
      s = ParseSizeKey(key, v, &c.global_segment_size);
    } else if (key == "local_buffer_size") {
      s = ParseSizeKey(key, v, &c.local_buffer_size);
    } else if (key == "protocol") {
      c.protocol = v;
    } else if (key == "rdma_devices" || key == "device_name") {
      c.rdma_devices = v;
    } else if (key == "master_server_addr" || key == "master_server_address") {
      c.master_server_addr = v;
    } else if (key == "tenant" || key == "tenant_id") {
      c.tenant = v;
    } else if (key == "transport") {
      std::string t = Lower(v);
      if (t == "auto") {
        c.transport = TransportMode::kAuto;
      } else if (t == "shm") {
        c.transport = TransportMode::kShm;
      } else if (t == "tcp") {
        c.transport = TransportMode::kTcp;
      } else {
        s = Status(ErrorCode::INVALID_PARAMS, "transport: auto, shm or tcp");
      }
    } else if (key == "rpc_timeout_ms") {
      s = ParseInt(key, v, &n);
      c.rpc_timeout_ms = static_cast<int>(n);
    } else if (key == "data_connect_timeout_ms") {
      s = ParseInt(key, v, &n);
      c.data_connect_timeout_ms =
          static_cast<int>(std::clamp<int64_t>(n, -1, INT32_MAX));
    } else if (key == "data_io_timeout_ms") {
      s = ParseInt(key, v, &n);
      c.data_io_timeout_ms =
          static_cast<int>(std::clamp<int64_t>(n, -1, INT32_MAX));
    } else if (key == "heartbeat_interval_ms") {
      s = ParseInt(key, v, &c.heartbeat_interval_ms);
    } else if (key == "lease_cache") {
      s = ParseBool(key, v, &c.lease_cache);
    } else if (key == "enable_ssd_prefetch") {
      s = ParseBool(key, v, &c.enable_ssd_prefetch);
    } else if (key == "enable_ssd_offload") {
      s = ParseBool(key, v, &c.enable_ssd_offload);
    } else if (key == "ssd_offload_path") {
      c.ssd_offload_path = v;
    } else if (key == "ssd_capacity_bytes") {
      s = ParseSizeKey(key, v, &c.ssd_capacity_bytes);
    } else if (key == "credential_file") {
      c.credential_file = v;
    } else if (key == "cluster_secret_file") {
      c.cluster_secret_file = v;
    } else if (key == "tls_ca_file") {
      c.tls_ca_file = v;
    } else if (key == "tls_cert_file") {
      c.tls_cert_file = v;
    } else if (key == "tls_key_file") {
      c.tls_key_file = v;
    }
    if (!s.ok()) return s;
  }
  if (Status s = c.Validate(); !s.ok()) return s;
  return c;
}

}  // namespace kvpool::compat
