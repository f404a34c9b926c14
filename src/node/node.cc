#include "node/node.h"
#include "common/failpoint.h"
#include "common/thread_name.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <map>

#include "common/crypto.h"
#include "common/host_id.h"
#include "node/heartbeat_schedule.h"
#include "transport/local_holders.h"
#include "transport/local_segments.h"

namespace kvpool {

namespace {
std::string GenerateNodeId() {
  static std::atomic<int> counter{0};
  char host[128] = {0};
  gethostname(host, sizeof(host) - 1);
  return fmt::format("{}-{}-{}", host, getpid(), counter++);
}

// Names of extra segments: random UUIDs in Mooncake's text form.
std::string NewSegmentName() {
  std::string b = crypto::RandomBytes(16);
  // A version-4 (random) UUID of RFC 4122, as Mooncake's are: a client that
  // checks the version and variant bits accepts it.
  b[6] = static_cast<char>((static_cast<uint8_t>(b[6]) & 0x0f) | 0x40);
  b[8] = static_cast<char>((static_cast<uint8_t>(b[8]) & 0x3f) | 0x80);
  std::string hex;
  for (size_t i = 0; i < b.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) hex += '-';
    hex += fmt::format("{:02x}", static_cast<uint8_t>(b[i]));
  }
  return hex;
}

TcpDataClientOptions PromotionClientOptions(const NodeConfig& c) {
  TcpDataClientOptions o;
  o.tls_ca_file = c.data_tls_ca_file;
  return o;
}
}  // namespace

Node::Node(NodeConfig config, const Clock* clock)
    : config_(std::move(config)),
      clock_(clock),
      tcp_(PromotionClientOptions(config_)) {
  if (config_.node_id.empty()) config_.node_id = GenerateNodeId();
}

Node::~Node() { Stop(); }

std::string Node::data_endpoint() const {
  return fmt::format("{}:{}", config_.local_hostname,
                     data_server_ ? data_server_->port() : 0);
}

Status Node::Start() {
  if (Status s = config_.Validate(); !s.ok()) return s;
  MasterSecurityFiles files;
  files.credential_file = config_.cluster_secret_file;
  files.secret_role = auth::Role::kNode;
  files.secret_principal = config_.node_id;
  files.tls_ca_file = config_.tls_ca_file;
  files.tls_cert_file = config_.tls_cert_file;
  files.tls_key_file = config_.tls_key_file;
  auto security = LoadMasterSecurity(files);
  if (!security.ok()) return security.status();
  master_ = std::make_unique<MasterClient>(config_.master_server_address,
                                           config_.rpc_timeout_ms,
                                           std::move(security.value()));
  // Huge pages where it can (segment_dir.h); the files go where it says.
  dir_ = SegmentDir::Open(config_.segment_dir, config_.segment_huge_pages,
                          config_.node_id);
  files_dir_ = dir_->path();
  // The shm name carries the pid so a crashed node's leftover file never
  // collides with a new one.
  std::string shm_name = fmt::format("kvpool-{}-{}", getpid(), config_.node_id);
  for (char& c : shm_name) {
    if (c == '/') c = '_';
  }
  // Not populated here (~0.3 s per GiB before mounting): segment_populator.h
  auto seg = ShmSegment::Create(shm_name, config_.global_segment_size,
                                files_dir_, /*populate=*/false);
  if (!seg.ok()) return seg.status();
  segment_ = std::move(seg.value());
  if (config_.prefetch_buffer_segment > 0) {
    auto buf = ShmSegment::Create(shm_name + "-prefetch",
                                  config_.prefetch_buffer_segment, files_dir_,
                                  /*populate=*/false);
    if (!buf.ok()) return buf.status();
    buffer_ = std::move(buf.value());
  }
  if (config_.segment_prefault) {
    populator_ = SegmentPopulator::Launch({segment_, buffer_}, populate_hook_);
  }
  PublishLocalSegment(segment_);
  PublishLocalSegment(buffer_);
  TcpDataServerOptions data_options;
  data_options.io_threads = config_.data_threads;
  data_options.capability_clock_skew_ms = config_.capability_clock_skew_ms;
  data_options.max_connections =
      static_cast<size_t>(config_.data_max_connections);
  data_options.idle_timeout_ms = config_.data_idle_timeout_ms;
  data_options.max_buffered_bytes = config_.data_max_buffered_bytes;
  data_options.tls_cert_file = config_.data_tls_cert_file;
  data_options.tls_key_file = config_.data_tls_key_file;
  // Nothing is served before the master has given this node its key.
  data_options.require_capabilities = true;
  data_server_ =
      std::make_unique<TcpDataServer>(&table_, config_.node_id, data_options);
  if (config_.enable_ssd_offload) {
    const NodeConfig holder = config_.WithPrefetchProfile();
    if (holder.prefetch_profile == "rfc")
      spdlog::info(
          "prefetch_profile=rfc: the seeds' holder (every promotion "
          "reads the disk, one sequential worker)");
    SsdTierConfig sc;
    sc.ssd_offload_path = config_.ssd_offload_path;
    sc.ssd_capacity_bytes = config_.ssd_capacity_bytes;
    sc.ssd_segment_file_size = config_.ssd_segment_file_size;
    sc.ssd_gc_interval_ms = config_.ssd_gc_interval_ms;
    sc.ssd_eviction_interval_ms = config_.ssd_eviction_interval_ms;
    sc.ssd_io_backend = config_.ssd_io_backend;
    sc.ssd_verify_threads = config_.ssd_verify_threads;
    sc.promotion_pull = config_.promotion_pull;
    sc.promotion_pull_interval_ms = config_.promotion_pull_interval_ms;
    sc.promotion_max_per_pull = size_t(config_.promotion_max_per_pull);
    sc.promotion_read_batch = size_t(holder.promotion_read_batch);
    sc.promotion_inflight_bytes = holder.promotion_inflight_bytes;
    sc.promotion_workers = int(config_.promotion_workers);
    sc.promotion_drop_unreachable = holder.promotion_drop_unreachable;
    sc.ssd_read_share_bytes = holder.ssd_read_share_bytes;
    sc.promotion_yield_to_gets_ms = holder.promotion_yield_to_gets_ms;
    sc.promotion_skip_after_get_ms = holder.promotion_skip_after_get_ms;
    sc.promotion_staging_bytes = holder.promotion_staging_bytes;
    // Only the node's own segments: an extra segment's memory may go back
    // to its owner, and only the data server's requests on it are waited
    // for (the tier reaches it over TCP, as another node's).
    ssd_ = std::make_shared<SsdTier>(sc, config_.node_id, master_.get(),
                                     &own_table_, &tcp_, clock_);
    // A promoted replica's bytes were verified against its SSD record: its
    // placement event takes that checksum instead of hashing 1 MiB again on
    // the heartbeat thread (the notify that leads to the event comes after).
    ssd_->SetPromotionWrittenHook(
        [this](uint64_t segment_id, uint64_t offset, uint64_t size,
               uint64_t version, const std::string& tenant,
               const std::string& key, uint64_t checksum) {
          if (auto slot = ResolveSlot(segment_id)) {
            directory_.NoteChecksum(slot->slot, offset, size, version, tenant,
                                    key, checksum);
          }
        });
    if (Status s = ssd_->Start(); !s.ok()) return s;
    data_server_->SetSsdReadHandler(
        [tier = ssd_.get()](std::span<KeyReadOp> ops) {
          tier->ServeReads(ops);
        });
    if (!config_.emulate_pre_prefetch_holder)
      data_server_->SetPrefetchHandler(
          [tier = ssd_.get()](const std::string& tenant,
                              const std::vector<std::string>& keys,
                              bool for_next_get) {
            return tier->PrefetchKeys(tenant, keys, nullptr, for_next_get);
          });
    RegisterLocalHolder(config_.node_id, ssd_);
  }
  data_server_->SetMetrics(&metrics_);
  if (config_.dram_directory) {
    // A write token lives a few seconds past its put: a client whose value
    // was removed or evicted meanwhile must not write into the complete
    // value that took its range since (docs/security.md).
    data_server_->SetWriteGuard(
        [this](uint64_t segment_id, uint64_t offset, uint64_t length) {
          auto slot = ResolveSlot(segment_id);
          return !slot || !directory_.Overlaps(slot->slot, offset, length);
        });
  }
  if (Status s =
          data_server_->Start(config_.data_bind_address, config_.data_port);
      !s.ok()) {
    return s;
  }
  if (Status s = Mount(); !s.ok()) {
    data_server_->Stop();
    return s;
  }
  if (config_.metrics_port >= 0) {
    metrics_.AddGauge(
        "kvpool_node_data_bytes_total", "path=\"tcp\",dir=\"read\"",
        [this] { return double(data_server_->stats().bytes_read.load()); });
    metrics_.AddGauge(
        "kvpool_node_data_bytes_total", "path=\"tcp\",dir=\"write\"",
        [this] { return double(data_server_->stats().bytes_written.load()); });
    metrics_.AddGauge("kvpool_node_data_bad_frames_total", "", [this] {
      return double(data_server_->stats().bad_frames.load());
    });
    metrics_.AddGauge("kvpool_node_data_capability_refusals_total", "", [this] {
      return double(data_server_->stats().capability_refusals.load());
    });
    metrics_.AddGauge(
        "kvpool_node_data_connections_closed_total", "reason=\"refused\"",
        [this] {
          return double(data_server_->stats().connections_refused.load());
        });
    metrics_.AddGauge(
        "kvpool_node_data_connections_closed_total", "reason=\"evicted\"",
        [this] {
          return double(data_server_->stats().connections_evicted.load());
        });
    metrics_.AddGauge(
        "kvpool_node_data_connections_closed_total", "reason=\"idle\"",
        [this] { return double(data_server_->stats().idle_closed.load()); });
    metrics_.AddGauge(
        "kvpool_node_data_write_guard_refusals_total", "", [this] {
          return double(data_server_->stats().write_guard_refusals.load());
        });
    metrics_.AddGauge(
        "kvpool_node_data_write_generation_refusals_total", "", [this] {
          return double(data_server_->stats().write_generation_refusals.load());
        });
    metrics_.AddGauge(
        "kvpool_node_data_write_generation_waits_total", "", [this] {
          return double(data_server_->stats().write_generation_waits.load());
        });
    metrics_.AddGauge("kvpool_node_data_write_record_intervals", "", [this] {
      return double(data_server_->write_record_intervals());
    });
    metrics_.AddGauge("kvpool_node_data_budget_refusals_total", "", [this] {
      return double(data_server_->stats().budget_refusals.load());
    });
    metrics_.AddGauge(
        "kvpool_node_data_tls_handshake_failures_total", "", [this] {
          return double(data_server_->stats().tls_handshake_failures.load());
        });
    metrics_.AddGauge("kvpool_node_dram_directory_entries", "",
                      [this] { return double(directory_.size()); });
    metrics_.AddGauge(
        "kvpool_node_dram_directory_noted_checksums_total", "",
        [this] { return double(directory_.noted_checksums_used()); },
        "placements that took a promotion's verified checksum (no hash)");
    metrics_.AddGauge("kvpool_node_segment_page_bytes", "",
                      [this] { return double(segment_->block_size()); });
    metrics_.AddGauge("kvpool_node_segment_capacity_bytes", "kind=\"main\"",
                      [this] { return double(config_.global_segment_size); });
    metrics_.AddGauge(
        "kvpool_node_segment_capacity_bytes", "kind=\"prefetch_buffer\"",
        [this] { return double(config_.prefetch_buffer_segment); });
    metrics_.AddGauge("kvpool_node_segment_capacity_bytes", "kind=\"extra\"",
                      [this] { return double(extra_bytes_.load()); });
    // The SSD tier keeps its own registry (offload, promotion, prefetch
    // counters); /metrics serves both.
    http_ = std::make_unique<HttpEndpoint>(
        [this] {
          std::string out = metrics_.RenderPrometheus();
          if (ssd_) out += ssd_->metrics().RenderPrometheus();
          return out;
        },
        [this] { return StatusJson(); });
    if (Status s =
            http_->Start(config_.data_bind_address, config_.metrics_port);
        !s.ok()) {
      Stop();
      return s;
    }
  }
  {
    MutexLock lock(&mu_);
    stopping_ = false;
  }
  {
    MutexLock lock(&extra_mu_);
    extras_closed_ = false;
  }
  hb_thread_ = std::thread([this] {
    SetThreadName("kvp-heartbeat");
    HeartbeatLoop();
  });
  spdlog::info("node {} serving {} bytes at {} (shm {}, {} KiB pages)",
               config_.node_id, config_.global_segment_size, data_endpoint(),
               segment_->path(), segment_->block_size() / 1024);
  return Status::OK();
}

Status Node::MountOne(const ShmSegment& seg, rpc::SegmentKind kind,
                      std::atomic<uint64_t>* id) {
  rpc::MountSegmentRequest req;
  req.set_node_id(config_.node_id);
  req.set_host_id(LocalHostId());
  req.set_kind(kind);
  req.set_size(seg.size());
  req.set_shm_path(seg.path());
  req.set_data_endpoint(data_endpoint());
  req.set_ssd_enabled(ssd_ != nullptr);
  req.set_pulls_promotions(ssd_ != nullptr && config_.promotion_pull);
  req.set_remount(id->load() != 0);
  req.set_keeps_dram_directory(config_.dram_directory);
  req.set_known_epoch(master_->known_epoch());
  req.set_opens_when_served(true);
  rpc::MountSegmentResponse resp;
  if (Status s =
          master_->Call(&rpc::MasterService::Stub::MountSegment, req, &resp);
      !s.ok()) {
    return s;
  }
  if (!master_->AcceptEpoch(resp.epoch())) {
    metrics_.GetCounter("kvpool_node_stale_epoch_replies_total").Inc();
    return Status(ErrorCode::RPC_FAIL,
                  "a master of an older epoch (" +
                      std::to_string(resp.epoch()) + ", seen " +
                      std::to_string(master_->known_epoch()) +
                      ") answered the mount: ignored");
  }
  if (resp.error_code() != 0) {
    return Status(ErrorCodeFromInt(resp.error_code()),
                  "master refused the segment");
  }
  // The key first: the new segment is never served under the old one.
  if (resp.capability_key().size() == cap::kKeySize) {
    data_server_->SetCapabilityKey(
        std::make_shared<cap::Key>(resp.capability_key()));
  } else if (kind == rpc::MAIN) {
    spdlog::warn(
        "node {}: the master signs no data-plane capabilities (an older "
        "master): serving reads and writes unchecked",
        config_.node_id);
    data_server_->SetCapabilityKey(nullptr);
  }
  // Serve the new id before dropping the old one so no window refuses reads.
  uint64_t old = id->exchange(resp.segment_id());
  table_.Add(resp.segment_id(), SegmentView{seg.data(), seg.size()});
  own_table_.Add(resp.segment_id(), SegmentView{seg.data(), seg.size()});
  if (old != 0 && old != resp.segment_id()) {
    table_.Remove(old);
    own_table_.Remove(old);
  }
  // Served from here on: the master places nothing in the segment until we
  // say so, so no put's write arrives before the key and the id above.
  // After a remount with a directory, the directory's last batch opens it
  // instead (nothing may be placed before the directory is in).
  if (!(req.remount() && config_.dram_directory)) {
    Status s = OpenAtMaster(resp.segment_id(), "segment");
    // An older master ignored opens_when_served and never closed it: it
    // answers as for an unknown extra segment, or lacks the RPC.
    if (s.code() == ErrorCode::SEGMENT_NOT_FOUND ||
        s.code() == ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS) {
      return Status::OK();
    }
    return s;
  }
  return Status::OK();
}

Status Node::OpenAtMaster(uint64_t id, const char* what) {
  rpc::MountExtraSegmentRequest open;
  open.set_node_id(config_.node_id);
  open.set_open_segment_id(id);
  rpc::MountSegmentResponse opened;
  Status s = master_->Call(&rpc::MasterService::Stub::MountExtraSegment, open,
                           &opened);
  if (s.ok() && opened.error_code() != 0) {
    s = Status(ErrorCodeFromInt(opened.error_code()),
               fmt::format("master did not open the {}", what));
  }
  return s;
}

Status Node::MountExtra(Extra* e, bool remount) {
  rpc::MountExtraSegmentRequest req;
  req.set_node_id(config_.node_id);
  req.set_size(e->memory->size());
  // Only the node's own file is offered to same-host clients: a caller's
  // file is read and written by this node alone, so nothing touches it
  // once it is unmounted.
  if (e->allocated) req.set_shm_path(e->memory->path());
  req.set_remount(remount);
  rpc::MountSegmentResponse resp;
  if (Status s = master_->Call(&rpc::MasterService::Stub::MountExtraSegment,
                               req, &resp);
      !s.ok()) {
    return s;
  }
  if (resp.error_code() != 0) {
    return Status(ErrorCodeFromInt(resp.error_code()),
                  "master refused the extra segment");
  }
  const uint64_t id = resp.segment_id();
  // Served before it is opened: the master places nothing in it until then,
  // so no put is granted a range this node does not serve yet.
  table_.Add(id, SegmentView{e->memory->data(), e->memory->size()});
  Status s = OpenAtMaster(id, "extra segment");
  if (!s.ok()) {
    // Closed at the master, it takes nothing; take it out there too if we
    // can (it goes with the node otherwise).
    rpc::UnmountSegmentRequest un;
    un.set_node_id(config_.node_id);
    un.set_segment_id(id);
    rpc::UnmountSegmentResponse unresp;
    master_->Call(&rpc::MasterService::Stub::UnmountSegment, un, &unresp)
        .IgnoreError();
    table_.RemoveAndWait(id);
    return s;
  }
  e->id = id;
  return Status::OK();
}

bool Node::MountPendingExtras(bool remount) {
  bool all = true;
  for (auto& [name, e] : extras_) {
    if (e.id != 0) continue;
    if (Status s = MountExtra(&e, remount); !s.ok()) {
      spdlog::warn("node {}: mounting extra segment {} again failed: {}",
                   config_.node_id, name, s.ToString());
      all = false;
    }
  }
  return all;
}

Result<std::string> Node::AddExtra(std::unique_ptr<ShmSegment> memory,
                                   bool allocated) {
  MutexLock lock(&extra_mu_);
  if (extras_closed_ || !master_ || !data_server_ || segment_id_.load() == 0) {
    return Status(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS,
                  "the node is not running");
  }
  // Two segments over the same bytes would hand them out twice.
  auto overlaps = [&](const ShmSegment* other) {
    return other != nullptr && memory->Overlaps(*other);
  };
  bool shared = overlaps(segment_.get()) || overlaps(buffer_.get());
  for (const auto& [name, e] : extras_)
    shared = shared || overlaps(e.memory.get());
  if (shared) {
    return Status(ErrorCode::SEGMENT_ALREADY_EXISTS,
                  memory->path() + " shares bytes with a segment of node " +
                      config_.node_id);
  }
  Extra e{std::move(memory), allocated, 0};
  if (Status s = MountExtra(&e, /*remount=*/false); !s.ok()) return s;
  std::string name = NewSegmentName();
  spdlog::info("node {}: extra segment {} ({} bytes of {}) mounted as {}",
               config_.node_id, name, e.memory->size(), e.memory->path(), e.id);
  extra_bytes_ += e.memory->size();
  extras_.emplace(name, std::move(e));
  return name;
}

Result<std::string> Node::MountFileSegment(const std::string& path,
                                           uint64_t offset, uint64_t size) {
  auto memory = ShmSegment::OpenRange(path, offset, size);
  if (!memory.ok()) return memory.status();
  return AddExtra(std::move(memory.value()), /*allocated=*/false);
}

Result<std::string> Node::AllocateExtraSegment(uint64_t size) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (size == 0 || size > UINT64_MAX - (page - 1)) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "extra segment size " + std::to_string(size));
  }
  const uint64_t rounded = (size + page - 1) / page * page;
  std::string name = fmt::format("kvpool-{}-{}-extra{}", getpid(),
                                 config_.node_id, ++extra_files_);
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  auto memory = ShmSegment::Create(name, rounded, files_dir_);
  if (!memory.ok()) return memory.status();
  return AddExtra(std::move(memory.value()), /*allocated=*/true);
}

Status Node::UnmountExtraSegment(const std::string& name) {
  MutexLock lock(&extra_mu_);
  auto it = extras_.find(name);
  if (it == extras_.end()) {
    return Status(ErrorCode::SEGMENT_NOT_FOUND, "no extra segment " + name);
  }
  Extra& e = it->second;
  if (e.id != 0) {
    // The master first: once it answers, it places nothing more in the
    // segment and its values are gone (clean misses).
    rpc::UnmountSegmentRequest req;
    req.set_node_id(config_.node_id);
    req.set_segment_id(e.id);
    rpc::UnmountSegmentResponse resp;
    Status s =
        master_->Call(&rpc::MasterService::Stub::UnmountSegment, req, &resp);
    if (s.ok()) s = Status(ErrorCodeFromInt(resp.error_code()), "unmount");
    // SEGMENT_NOT_FOUND / CLIENT_NOT_FOUND: the master has forgotten the
    // segment already (it restarted, or declared this node dead); a remount
    // waits for extra_mu_, which we hold.
    if (!s.ok() && s.code() != ErrorCode::SEGMENT_NOT_FOUND &&
        s.code() != ErrorCode::CLIENT_NOT_FOUND) {
      return s;
    }
    // Then the data server: requests that resolved the segment finish
    // before its memory is let go.
    table_.RemoveAndWait(e.id);
  }
  spdlog::info("node {}: extra segment {} ({}) unmounted", config_.node_id,
               name, e.memory->path());
  extra_bytes_ -= e.memory->size();
  extras_.erase(it);  // unmaps it (and removes the node's own file)
  return Status::OK();
}

std::vector<Node::ExtraSegmentInfo> Node::extra_segments() const {
  MutexLock lock(&extra_mu_);
  std::vector<ExtraSegmentInfo> out;
  for (const auto& [name, e] : extras_) {
    out.push_back(ExtraSegmentInfo{name, e.allocated, e.id, e.memory->size(),
                                   e.memory->path(), e.memory->file_offset()});
  }
  return out;
}

Status Node::Mount() {
  // Extra segments are mounted, unmounted and mounted again one at a time.
  MutexLock extra(&extra_mu_);
  // A new registration at the master numbers its events from 1 again.
  directory_.ResetSequence();
  const bool remount = segment_id_.load() != 0;
  if (remount) {
    // The extra segments' ids are the forgotten mount's: out of the table
    // before this mount's ids, which may reuse them, go in.
    for (auto& [name, e] : extras_) {
      if (e.id != 0) table_.Remove(e.id);
      e.id = 0;
    }
  }
  if (Status s = MountOne(*segment_, rpc::MAIN, &segment_id_); !s.ok())
    return s;
  if (buffer_) {
    if (Status s = MountOne(*buffer_, rpc::PREFETCH_BUFFER, &buffer_id_);
        !s.ok())
      return s;
  }
  // Extra segments come back too (their values do not: the node keeps no
  // directory of them), under new ids.
  extras_pending_ = !MountPendingExtras(remount);
  if (remount && config_.dram_directory) {
    // What DRAM still holds comes back before the SSD's copies, so a value
    // in both places is one object with two replicas.
    directory_pending_[0] = !RegisterDirectory(0, *segment_, segment_id_);
    if (buffer_)
      directory_pending_[1] = !RegisterDirectory(1, *buffer_, buffer_id_);
  }
  // What the SSD holds survives a master restart or our own: tell the pool.
  if (ssd_) {
    ssd_->RegisterWithMaster();
    // Promotions queued here belong to the master that forgot us.
    if (remount) ssd_->ResubmitPromotions();
  }
  return Status::OK();
}

std::optional<DramDirectory::SlotView> Node::ResolveSlot(
    uint64_t segment_id) const {
  if (segment_id != 0 && segment_id == segment_id_.load()) {
    return DramDirectory::SlotView{
        0, {static_cast<const uint8_t*>(segment_->data()), segment_->size()}};
  }
  if (buffer_ && segment_id != 0 && segment_id == buffer_id_.load()) {
    return DramDirectory::SlotView{
        1, {static_cast<const uint8_t*>(buffer_->data()), buffer_->size()}};
  }
  return std::nullopt;
}

bool Node::RegisterDirectory(int slot, const ShmSegment& seg, uint64_t id) {
  // Durations only observed for a log line or a histogram stay on
  // steady_clock; what the node decides by time reads clock_.
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<DramDirectory::Entry> entries = directory_.Verified(
      slot, {static_cast<const uint8_t*>(seg.data()), seg.size()});
  constexpr size_t kBatch = 4096;
  size_t refused = 0;
  std::map<std::string, size_t> refusals;  // by code, for the log
  size_t start = 0;
  do {
    const size_t end = std::min(entries.size(), start + kBatch);
    rpc::RegisterMemoryObjectsRequest req;
    req.set_node_id(config_.node_id);
    req.set_segment_id(id);
    for (size_t i = start; i < end; ++i) {
      auto* o = req.add_objects();
      o->set_tenant(entries[i].tenant);
      o->set_key(entries[i].key);
      o->set_offset(entries[i].offset);
      o->set_size(entries[i].size);
      o->set_version(entries[i].version);
    }
    req.set_done(end == entries.size());
    rpc::RegisterMemoryObjectsResponse resp;
    Status s = master_->Call(&rpc::MasterService::Stub::RegisterMemoryObjects,
                             req, &resp);
    if (s.code() == ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS) {
      return true;  // an older master (UNIMPLEMENTED): it sent no events
    }
    if (!s.ok() || resp.error_code() != 0) {
      spdlog::warn("node {}: re-registering DRAM objects failed: {}",
                   config_.node_id,
                   s.ok() ? ErrorCodeName(ErrorCodeFromInt(resp.error_code()))
                          : s.ToString());
      return false;
    }
    for (size_t i = start; i < end; ++i) {
      const int j = static_cast<int>(i - start);
      if (j >= resp.error_codes_size() || resp.error_codes(j) != 0) {
        directory_.Forget(slot, entries[i].offset);
        ++refused;
        ++refusals[j < resp.error_codes_size()
                       ? ErrorCodeName(ErrorCodeFromInt(resp.error_codes(j)))
                       : "no answer"];
      }
    }
    start = end;
  } while (start < entries.size());
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
  metrics_.GetCounter("kvpool_node_dram_reregistered_total")
      .Inc(entries.size() - refused);
  std::string why;
  for (const auto& [code, n] : refusals)
    why += fmt::format("{}{} {}", why.empty() ? ": " : ", ", n, code);
  spdlog::info(
      "node {}: re-registered {} DRAM objects of segment {} in {:.1f} ms ({} "
      "refused{}, {} checksum mismatches so far)",
      config_.node_id, entries.size() - refused, id, ms, refused, why,
      directory_.checksum_mismatches());
  return true;
}

void Node::WaitUntil(int64_t deadline_ms) {
  // Blocks on real time, but the deadline is the Clock's: a spurious wake
  // waits again, Stop() ends the wait.
  while (!stopping_) {
    const int64_t left = deadline_ms - clock_->NowMs();
    if (left <= 0) return;
    cv_.WaitFor(&mu_, std::chrono::milliseconds(left));
  }
}

void Node::HeartbeatLoop() {
  HeartbeatSchedule schedule(clock_, config_.heartbeat_interval_ms);
  MutexLock lock(&mu_);
  while (!stopping_) {
    if (hb_paused_) {
      WaitUntil(schedule.PausedUntil());
      continue;
    }
    lock.Unlock();
    // A long poll: the master answers at once when it has tasks for us and
    // otherwise after heartbeat_interval_ms, so this is both the liveness
    // beat and the immediate hand-over of offload and promotion work.
    rpc::HeartbeatRequest req;
    req.set_node_id(config_.node_id);
    req.set_wait_ms(static_cast<uint32_t>(config_.heartbeat_interval_ms));
    req.set_max_offload_tasks(ssd_ ? 256 : 0);
    if (auto room = ssd_ ? ssd_->HeartbeatPromotionRoom() : std::nullopt)
      req.set_max_promotion_tasks(*room);
    req.set_dram_acked_seq(directory_.applied_seq());
    req.set_known_epoch(master_->known_epoch());
    rpc::HeartbeatResponse resp;
    const int64_t started = schedule.BeatStarted();
    grpc::ClientContext ctx;
    {
      MutexLock g(&mu_);
      if (stopping_) break;
      hb_ctx_ = &ctx;
    }
    // The master holds the poll at most heartbeat_interval_ms: a reply
    // much later than that means a leader that is frozen or cut off, and
    // under HA (docs/ha.md) the node should be asking etcd for its
    // successor rather than waiting out a whole rpc_timeout_ms.
    const int deadline_ms =
        master_->follows_leader()
            ? static_cast<int>(std::min<int64_t>(
                  config_.rpc_timeout_ms, config_.heartbeat_interval_ms + 1000))
            : config_.rpc_timeout_ms;
    Status s = master_->CallWith(&ctx, &rpc::MasterService::Stub::Heartbeat,
                                 req, &resp, deadline_ms);
    {
      MutexLock g(&mu_);
      hb_ctx_ = nullptr;
    }
    if (s.ok() && !master_->AcceptEpoch(resp.epoch())) {
      // Fencing (docs/ha.md): a leader that has been replaced may still
      // answer; nothing it says (tasks, events, "forgot you") is applied.
      metrics_.GetCounter("kvpool_node_stale_epoch_replies_total").Inc();
      spdlog::warn("node {}: ignored a heartbeat reply of epoch {} (seen {})",
                   config_.node_id, resp.epoch(), master_->known_epoch());
      resp.Clear();
      s = Status(ErrorCode::RPC_FAIL, "stale master epoch");
    }
    const bool had_work =
        resp.offload_tasks_size() > 0 || resp.promotion_tasks_size() > 0 ||
        resp.disk_drops_size() > 0 || resp.dram_events_size() > 0;
    const HeartbeatSchedule::Next next =
        schedule.After(!s.ok() ? HeartbeatSchedule::Outcome::kFailed
                       : resp.error_code() == ToInt(ErrorCode::CLIENT_NOT_FOUND)
                           ? HeartbeatSchedule::Outcome::kUnknownNode
                           : HeartbeatSchedule::Outcome::kOk,
                       had_work, started);
    if (next.remount) {
      // The master forgot us (restart or declared dead): mount again and
      // hand it the directory of what our DRAM still holds.
      spdlog::warn("node {}: master does not know us; mounting again",
                   config_.node_id);
      if (Status m = Mount(); !m.ok())
        spdlog::warn("remount failed: {}", m.ToString());
    } else if (!s.ok()) {
      metrics_.GetCounter("kvpool_node_heartbeat_failures_total").Inc();
    } else {
      if (resp.dram_events_size() > 0) {
        directory_.Apply(
            resp.dram_events(), [this](uint64_t id) { return ResolveSlot(id); },
            [this](const rpc::DramEvent& ev) {
              if (ssd_) ssd_->DropRecord(ev.tenant(), ev.key(), ev.version());
            });
      }
      if (resp.dram_events_size() > 0)
        KVPOOL_FAILPOINT("node.directory.before_ack");
      if (directory_pending_[0])
        directory_pending_[0] = !RegisterDirectory(0, *segment_, segment_id_);
      if (directory_pending_[1] && buffer_)
        directory_pending_[1] = !RegisterDirectory(1, *buffer_, buffer_id_);
      // Extra segments a remount could not mount (tried again, as mounted
      // before; never waits behind a mount_segment call in flight).
      if (extra_mu_.TryLock()) {
        if (extras_pending_)
          extras_pending_ = !MountPendingExtras(/*remount=*/true);
        extra_mu_.Unlock();
      }
    }
    if (s.ok() && resp.error_code() == 0 && ssd_) {
      // Drops first: they are older than any offload of the same response.
      ssd_->DropRecords(resp.disk_drops());
      ssd_->EnqueueOffloads(resp.offload_tasks());
      ssd_->EnqueuePromotions(resp.promotion_tasks());
    }
    lock.Lock();
    WaitUntil(next.beat_at_ms);  // HeartbeatSchedule paces
  }
}

bool Node::heartbeat_in_flight() const {
  MutexLock lock(&mu_);
  return hb_ctx_ != nullptr;
}

void Node::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    if (hb_ctx_) hb_ctx_->TryCancel();
  }
  cv_.SignalAll();
  if (hb_thread_.joinable()) hb_thread_.join();
  // Finish queued offloads and promotions while the segment is still ours.
  if (ssd_) {
    UnregisterLocalHolder(config_.node_id);
    ssd_->Stop();
  }
  {
    // Extra segments leave the pool first; their memory goes only once the
    // data server has stopped (no request in flight can touch it then).
    MutexLock lock(&extra_mu_);
    extras_closed_ = true;
    for (auto& [name, e] : extras_) {
      if (!master_ || e.id == 0) continue;
      rpc::UnmountSegmentRequest req;
      req.set_node_id(config_.node_id);
      req.set_segment_id(e.id);
      rpc::UnmountSegmentResponse resp;
      master_->Call(&rpc::MasterService::Stub::UnmountSegment, req, &resp)
          .IgnoreError();
      e.id = 0;
    }
  }
  for (auto* id : {&buffer_id_, &segment_id_}) {
    if (!master_ || id->load() == 0) continue;
    rpc::UnmountSegmentRequest req;
    req.set_node_id(config_.node_id);
    req.set_segment_id(id->load());
    rpc::UnmountSegmentResponse resp;
    // Best effort: a master that cannot be told forgets the segment when
    // the node's heartbeats stop.
    master_->Call(&rpc::MasterService::Stub::UnmountSegment, req, &resp)
        .IgnoreError();
    *id = 0;
  }
  if (http_) http_->Stop();
  if (data_server_) data_server_->Stop();
  table_.Clear();
  own_table_.Clear();
  {
    MutexLock lock(&extra_mu_);
    extras_.clear();
    extra_bytes_ = 0;
  }
  if (populator_) populator_->Stop();
  // A client of this process may still hold a mapping: the memory stays
  // valid for it, but the names go now, so a new node can take them.
  for (auto* seg : {&segment_, &buffer_}) {
    if (!*seg) continue;
    WithdrawLocalSegment(seg->get());
    (*seg)->Unlink();
    seg->reset();
  }
  dir_.reset();
}

std::string Node::StatusJson() const {
  const auto& st = data_server_->stats();
  std::string extras;
  for (const auto& e : extra_segments()) {
    extras += fmt::format(
        R"({}{{"name":"{}","segment_id":{},"size":{},"allocated":{}}})",
        extras.empty() ? "" : ",", e.name, e.segment_id, e.size,
        e.allocated ? "true" : "false");
  }
  return fmt::format(
      R"({{"node_id":"{}","master_server_address":"{}","segment_id":{},"segment_size":{},"data_endpoint":"{}",)"
      R"("prefetch_buffer":{{"segment_id":{},"size":{}}},"extra_segments":[{}],"promotion_pull":{},)"
      R"("tcp_bytes_read":{},"tcp_bytes_written":{},"bad_frames":{},"ssd":{}}})",
      config_.node_id, config_.master_server_address, segment_id_.load(),
      config_.global_segment_size, data_endpoint(), buffer_id_.load(),
      config_.prefetch_buffer_segment, extras,
      config_.promotion_pull ? "true" : "false", st.bytes_read.load(),
      st.bytes_written.load(), st.bad_frames.load(),
      ssd_ ? ssd_->StatusJson() : std::string("null"));
}

}  // namespace kvpool
