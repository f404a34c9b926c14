#include "bench/soak_load.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "benchutil/bench_util.h"

namespace kvpool::soak {

namespace {

constexpr uint64_t kMagic = 0x31304b414f53564bull;  // "KVSOAK01"
constexpr uint64_t kHeaderBytes = 32;
constexpr int kMaxBatch = 4;  // keys per BatchPutFrom / BatchGetInto

// splitmix64's finaliser: a cheap, well-mixed function of a counter, so
// word i of a value can be computed (and checked) without the words before.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t Seed(uint64_t key_hash, uint64_t version) {
  return Mix(key_hash * 0x100000001b3ull ^ Mix(version));
}

std::string KeyName(int client, int idx) {
  return fmt::format("soak/c{}/k{:04}", client, idx);
}

const char* PrefetchName(PrefetchToMemoryStatus s) {
  switch (s) {
    case PrefetchToMemoryStatus::kInMemory:
      return "IN_MEMORY";
    case PrefetchToMemoryStatus::kQueued:
      return "QUEUED";
    case PrefetchToMemoryStatus::kThrottledWatermark:
      return "THROTTLED_WATERMARK";
    case PrefetchToMemoryStatus::kThrottledCap:
      return "THROTTLED_CAP";
    case PrefetchToMemoryStatus::kNoLocalDisk:
      return "NO_LOCAL_DISK";
    case PrefetchToMemoryStatus::kNotFound:
      return "NOT_FOUND";
  }
  return "?";
}

}  // namespace

uint64_t KeyHash(const std::string& key) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, then mixed
  for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ull;
  return Mix(h);
}

uint64_t ValueSize(uint64_t key_hash, uint64_t version) {
  return kMinValueBytes + Mix(key_hash ^ Mix(version + 1)) %
                              (kMaxValueBytes - kMinValueBytes + 1);
}

void FillValue(uint64_t key_hash, uint64_t version, uint8_t* buf) {
  const uint64_t size = ValueSize(key_hash, version);
  const uint64_t header[4] = {kMagic, key_hash, version, size};
  std::memcpy(buf, header, kHeaderBytes);
  const uint64_t seed = Seed(key_hash, version);
  uint64_t off = kHeaderBytes;
  for (; off + 8 <= size; off += 8) {
    const uint64_t w = Mix(seed ^ off);
    std::memcpy(buf + off, &w, 8);
  }
  if (off < size) {
    const uint64_t w = Mix(seed ^ off);
    std::memcpy(buf + off, &w, size - off);
  }
}

std::string CheckValue(uint64_t key_hash, const uint8_t* buf, uint64_t n,
                       uint64_t* version) {
  if (n < kHeaderBytes) return fmt::format("a {}-byte value", n);
  uint64_t header[4];
  std::memcpy(header, buf, kHeaderBytes);
  if (header[0] != kMagic) {
    return fmt::format("not a soak value (first word {:#018x}, {} bytes)",
                       header[0], n);
  }
  const uint64_t v = header[2];
  if (header[1] != key_hash) {
    return fmt::format("another key's bytes (key hash {:#x}, version {})",
                       header[1], v);
  }
  const uint64_t size = ValueSize(key_hash, v);
  if (header[3] != size || n != size) {
    return fmt::format(
        "version {} with {} bytes (header says {}), but that version has {}", v,
        n, header[3], size);
  }
  const uint64_t seed = Seed(key_hash, v);
  for (uint64_t off = kHeaderBytes; off < size; off += 8) {
    const uint64_t w = Mix(seed ^ off);
    const uint64_t len = std::min<uint64_t>(8, size - off);
    if (std::memcmp(buf + off, &w, len) != 0) {
      return fmt::format(
          "version {}'s header, but its bytes differ from offset {} of {} "
          "(torn or corrupt)",
          v, off, size);
    }
  }
  *version = v;
  return "";
}

const char* OpName(OpKind op) {
  static const char* const kNames[] = {
      "put",          "batch_put", "upsert",         "get",
      "foreign_get",  "exist",     "exist_prefetch", "remove",
      "batch_remove", "prefetch",  "sweep"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == int(OpKind::kCount));
  return kNames[int(op)];
}

void LoadStats::CountError(OpKind op, ErrorCode code) {
  std::lock_guard<std::mutex> lock(mu_);
  ++errors_[std::string(OpName(op)) + ":" + ErrorCodeName(code)];
}

std::map<std::string, uint64_t> LoadStats::Errors() {
  std::lock_guard<std::mutex> lock(mu_);
  return errors_;
}

void LoadStats::WrongRead(int client, const std::string& key,
                          const std::string& what) {
  wrong_reads.fetch_add(1);
  std::lock_guard<std::mutex> lock(mu_);
  if (++printed_ > 100) return;  // the count says the rest
  std::fprintf(stderr, "WRONG READ client %d key %s: %s\n", client, key.c_str(),
               what.c_str());
  std::fflush(stderr);
}

LoadClient::LoadClient(LoadOptions opts, LoadStats* stats)
    : opts_(std::move(opts)), stats_(stats), rng_(opts_.seed) {
  keys_.resize(opts_.keys_per_client);
  for (int i = 0; i < opts_.keys_per_client; ++i) {
    keys_[i].name = KeyName(opts_.client_index, i);
    keys_[i].hash = KeyHash(keys_[i].name);
  }
}

Status LoadClient::Init() {
  ClientConfig cfg;
  cfg.master_server_address = opts_.master_address;
  cfg.transport = opts_.tcp ? TransportMode::kTcp : TransportMode::kShm;
  cfg.enable_ssd_prefetch = true;  // exist with prefetch_to_memory promotes
  auto c = Client::Create(cfg);
  if (!c.ok()) return c.status();
  client_ = std::move(c).value();
  put_buf_.assign(kMaxBatch * kMaxValueBytes, 0);
  get_buf_.assign(kMaxBatch * kMaxValueBytes, 0);
  if (Status s = client_->RegisterBuffer(put_buf_.data(), put_buf_.size());
      !s.ok())
    return s;
  return client_->RegisterBuffer(get_buf_.data(), get_buf_.size());
}

size_t LoadClient::PickKey() {
  // A hot eighth of the keys takes half the picks, so that some SSD-only
  // keys are hit often enough to pass the promotion admission threshold.
  const size_t n = keys_.size();
  const size_t hot = std::max<size_t>(1, n / 8);
  if (rng_() % 2 == 0) return rng_() % hot;
  return rng_() % n;
}

std::vector<size_t> LoadClient::PickDistinct(int n) {
  std::vector<size_t> out;
  for (int tries = 0; int(out.size()) < n && tries < 4 * n; ++tries) {
    const size_t i = PickKey();
    if (std::find(out.begin(), out.end(), i) == out.end()) out.push_back(i);
  }
  return out;
}

std::string LoadClient::Describe(const KeyState& k) const {
  std::string maybe;
  for (uint64_t v : k.maybe) {
    if (!maybe.empty()) maybe += ',';
    maybe += std::to_string(v);
  }
  return fmt::format(
      "latest acknowledged version {}, failed writes since [{}], last "
      "acknowledged remove after version {}",
      k.acked, maybe, k.removed_version);
}

void LoadClient::Written(KeyState& k, uint64_t version, const Status& s,
                         OpKind op) {
  if (s.ok()) {
    k.acked = version;
    k.maybe.clear();
    stats_->bytes_written.fetch_add(ValueSize(k.hash, version));
  } else {
    // A failed write may still have replaced the value (the answer was lost
    // after the master published it): from now on both are acceptable.
    k.maybe.push_back(version);
    stats_->CountError(op, s.code());
  }
}

void LoadClient::Removed(KeyState& k, const Status& s, OpKind op) {
  // OBJECT_NOT_FOUND is as good as an acknowledged remove: the master says
  // the key is gone (evicted, or never stored), so it must stay gone.
  if (s.ok() || s.code() == ErrorCode::OBJECT_NOT_FOUND) {
    if (k.acked != 0 || !k.maybe.empty()) k.removed_version = k.acked;
    k.acked = 0;
    k.maybe.clear();
  } else {
    stats_->CountError(op, s.code());  // e.g. OBJECT_HAS_LEASE: unchanged
  }
}

void LoadClient::CheckOwnRead(KeyState& k, const Result<uint64_t>& r,
                              const uint8_t* buf, OpKind op) {
  if (!r.ok()) {
    if (r.code() == ErrorCode::OBJECT_NOT_FOUND) {
      stats_->misses.fetch_add(1);  // always allowed: it may be evicted
    } else {
      stats_->CountError(op, r.code());
    }
    return;
  }
  stats_->bytes_read.fetch_add(r.value());
  uint64_t v = 0;
  const std::string bad = CheckValue(k.hash, buf, r.value(), &v);
  if (!bad.empty()) {
    stats_->WrongRead(opts_.client_index, k.name,
                      fmt::format("{}: {}; {}", OpName(op), bad, Describe(k)));
    return;
  }
  const bool acceptable =
      (v != 0 && v == k.acked) ||
      std::find(k.maybe.begin(), k.maybe.end(), v) != k.maybe.end();
  if (acceptable) {
    stats_->hits.fetch_add(1);
    return;
  }
  const char* why = k.surely_absent() ? "a value after an acknowledged remove"
                                      : (v < k.acked ? "a stale version"
                                                     : "an unexpected version");
  stats_->WrongRead(opts_.client_index, k.name,
                    fmt::format("{} returned version {} ({}); {}", OpName(op),
                                v, why, Describe(k)));
}

void LoadClient::DoPut(bool batch) {
  // Put leaves an existing key as it is (and answers OK), so it is used
  // only where the key is surely absent; then an OK means this version.
  std::vector<size_t> idx;
  const int want = batch ? 1 + int(rng_() % kMaxBatch) : 1;
  for (int tries = 0; int(idx.size()) < want && tries < 16; ++tries) {
    const size_t i = PickKey();
    if (keys_[i].surely_absent() &&
        std::find(idx.begin(), idx.end(), i) == idx.end())
      idx.push_back(i);
  }
  if (idx.empty()) return DoUpsert();
  const OpKind op = batch ? OpKind::kBatchPut : OpKind::kPut;
  stats_->calls[int(op)].fetch_add(1);
  std::vector<std::string> names;
  std::vector<const void*> bufs;
  std::vector<uint64_t> sizes, versions;
  for (size_t j = 0; j < idx.size(); ++j) {
    KeyState& k = keys_[idx[j]];
    const uint64_t v = k.next_version++;
    uint8_t* p = put_buf_.data() + j * kMaxValueBytes;
    FillValue(k.hash, v, p);
    names.push_back(k.name);
    bufs.push_back(p);
    sizes.push_back(ValueSize(k.hash, v));
    versions.push_back(v);
  }
  const double t0 = bench::NowSec();
  std::vector<Status> st;
  if (batch) {
    st = client_->BatchPutFrom(names, bufs, sizes);
  } else {
    st.push_back(client_->Put(
        names[0],
        std::string_view(static_cast<const char*>(bufs[0]), sizes[0])));
  }
  stats_->put_latency.Add(bench::NowSec() - t0);
  for (size_t j = 0; j < idx.size(); ++j) {
    Written(keys_[idx[j]], versions[j],
            j < st.size() ? st[j] : Status(ErrorCode::INTERNAL_ERROR), op);
  }
}

void LoadClient::DoUpsert() {
  stats_->calls[int(OpKind::kUpsert)].fetch_add(1);
  KeyState& k = keys_[PickKey()];
  const uint64_t v = k.next_version++;
  FillValue(k.hash, v, put_buf_.data());
  const double t0 = bench::NowSec();
  Status s = client_->Upsert(
      k.name, std::string_view(reinterpret_cast<const char*>(put_buf_.data()),
                               ValueSize(k.hash, v)));
  stats_->put_latency.Add(bench::NowSec() - t0);
  Written(k, v, s, OpKind::kUpsert);
}

void LoadClient::ReadKeys(const std::vector<size_t>& idx, OpKind op) {
  std::vector<std::string> names;
  std::vector<void*> bufs;
  std::vector<uint64_t> sizes(idx.size(), kMaxValueBytes);
  for (size_t j = 0; j < idx.size(); ++j) {
    names.push_back(keys_[idx[j]].name);
    bufs.push_back(get_buf_.data() + j * kMaxValueBytes);
  }
  const double t0 = bench::NowSec();
  auto r = client_->BatchGetInto(names, bufs, sizes);
  if (op != OpKind::kSweep) stats_->get_latency.Add(bench::NowSec() - t0);
  for (size_t j = 0; j < idx.size(); ++j) {
    CheckOwnRead(
        keys_[idx[j]],
        j < r.size() ? r[j] : Result<uint64_t>(ErrorCode::INTERNAL_ERROR),
        static_cast<const uint8_t*>(bufs[j]), op);
  }
}

void LoadClient::DoGet() {
  stats_->calls[int(OpKind::kGet)].fetch_add(1);
  ReadKeys(PickDistinct(1 + int(rng_() % kMaxBatch)), OpKind::kGet);
}

void LoadClient::DoForeignGet() {
  if (opts_.num_clients < 2) return DoGet();
  stats_->calls[int(OpKind::kForeignGet)].fetch_add(1);
  // Another client may be replacing this key right now: any version may
  // come back, but only one version's bytes, whole.
  int other = int(rng_() % (opts_.num_clients - 1));
  if (other >= opts_.client_index) ++other;
  const std::string name = KeyName(other, int(rng_() % keys_.size()));
  const double t0 = bench::NowSec();
  auto r = client_->BatchGetInto({name}, {get_buf_.data()}, {kMaxValueBytes});
  stats_->get_latency.Add(bench::NowSec() - t0);
  if (r.empty() || !r[0].ok()) {
    const ErrorCode code = r.empty() ? ErrorCode::INTERNAL_ERROR : r[0].code();
    if (code == ErrorCode::OBJECT_NOT_FOUND) {
      stats_->misses.fetch_add(1);
    } else {
      stats_->CountError(OpKind::kForeignGet, code);
    }
    return;
  }
  stats_->bytes_read.fetch_add(r[0].value());
  uint64_t v = 0;
  const std::string bad =
      CheckValue(KeyHash(name), get_buf_.data(), r[0].value(), &v);
  if (!bad.empty()) {
    stats_->WrongRead(opts_.client_index, name, "foreign_get: " + bad);
  } else {
    stats_->hits.fetch_add(1);
  }
}

void LoadClient::DoExist(bool prefetch) {
  const OpKind op = prefetch ? OpKind::kExistPrefetch : OpKind::kExist;
  stats_->calls[int(op)].fetch_add(1);
  const std::vector<size_t> idx = PickDistinct(1 + int(rng_() % 8));
  std::vector<std::string> names;
  for (size_t i : idx) names.push_back(keys_[i].name);
  ExistOptions eo;
  eo.grant_lease = rng_() % 2 == 0;
  eo.prefetch_to_memory = prefetch;
  auto r = client_->BatchIsExist(names, eo);
  for (size_t j = 0; j < idx.size(); ++j) {
    KeyState& k = keys_[idx[j]];
    if (j >= r.size() || !r[j].ok()) {
      stats_->CountError(
          op, j < r.size() ? r[j].code() : ErrorCode::INTERNAL_ERROR);
    } else if (r[j].value() && k.surely_absent()) {
      stats_->WrongRead(opts_.client_index, k.name,
                        fmt::format("{} says it exists after an acknowledged "
                                    "remove; {}",
                                    OpName(op), Describe(k)));
    }
  }
}

void LoadClient::DoRemove(bool batch) {
  const OpKind op = batch ? OpKind::kBatchRemove : OpKind::kRemove;
  stats_->calls[int(op)].fetch_add(1);
  // Forced removes succeed under a lease (the master keeps the memory from
  // reuse until the lease ends); unforced ones meet OBJECT_HAS_LEASE.
  const bool force = rng_() % 2 == 0;
  if (!batch) {
    KeyState& k = keys_[PickKey()];
    Removed(k, client_->Remove(k.name, force), op);
    return;
  }
  const std::vector<size_t> idx = PickDistinct(1 + int(rng_() % 3));
  std::vector<std::string> names;
  for (size_t i : idx) names.push_back(keys_[i].name);
  auto st = client_->BatchRemove(names, force);
  for (size_t j = 0; j < idx.size(); ++j) {
    Removed(keys_[idx[j]],
            j < st.size() ? st[j] : Status(ErrorCode::INTERNAL_ERROR), op);
  }
}

void LoadClient::DoPrefetch() {
  stats_->calls[int(OpKind::kPrefetch)].fetch_add(1);
  const std::vector<size_t> idx = PickDistinct(1 + int(rng_() % 8));
  std::vector<std::string> names;
  for (size_t i : idx) names.push_back(keys_[i].name);
  auto r = client_->BatchPrefetchToMemory(names, rng_() % 2 ? 0 : 100);
  if (!r.ok()) {
    stats_->CountError(OpKind::kPrefetch, r.code());
    return;
  }
  for (size_t j = 0; j < idx.size() && j < r->size(); ++j) {
    const KeyState& k = keys_[idx[j]];
    // Any answer but NOT_FOUND means the master still has the key.
    if ((*r)[j] != PrefetchToMemoryStatus::kNotFound && k.surely_absent()) {
      stats_->WrongRead(opts_.client_index, k.name,
                        fmt::format("prefetch answered {} after an "
                                    "acknowledged remove; {}",
                                    PrefetchName((*r)[j]), Describe(k)));
    }
  }
}

void LoadClient::Run(const std::atomic<bool>& stop) {
  while (!stop.load(std::memory_order_relaxed)) {
    // Writes ~36%, reads ~32%, the rest probes, removes and triggers: enough
    // writes to keep the small pool evicting to SSD, enough removes that
    // keys keep coming and going.
    const int r = int(rng_() % 100);
    if (r < 10) {
      DoPut(false);
    } else if (r < 18) {
      DoPut(true);
    } else if (r < 36) {
      DoUpsert();
    } else if (r < 62) {
      DoGet();
    } else if (r < 68) {
      DoForeignGet();
    } else if (r < 74) {
      DoExist(false);
    } else if (r < 80) {
      DoExist(true);
    } else if (r < 86) {
      DoRemove(false);
    } else if (r < 90) {
      DoRemove(true);
    } else {
      DoPrefetch();
    }
  }
}

void LoadClient::FinalSweep() {
  std::vector<size_t> batch, absent;
  for (size_t i = 0; i < keys_.size(); ++i) {
    batch.push_back(i);
    if (keys_[i].surely_absent()) absent.push_back(i);
    if (int(batch.size()) == kMaxBatch || i + 1 == keys_.size()) {
      stats_->calls[int(OpKind::kSweep)].fetch_add(1);
      ReadKeys(batch, OpKind::kSweep);
      batch.clear();
    }
  }
  std::vector<std::string> names;
  for (size_t i : absent) names.push_back(keys_[i].name);
  ExistOptions eo;
  eo.grant_lease = false;
  auto r = client_->BatchIsExist(names, eo);
  for (size_t j = 0; j < absent.size() && j < r.size(); ++j) {
    if (r[j].ok() && r[j].value()) {
      stats_->WrongRead(opts_.client_index, keys_[absent[j]].name,
                        "sweep: exists after an acknowledged remove; " +
                            Describe(keys_[absent[j]]));
    }
  }
}

}  // namespace kvpool::soak
