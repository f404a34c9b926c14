// MooncakeStore's zero-copy calls (see compat_store.h): registered buffers,
// puts from and gets into them (whole values, several buffers per key,
// ranges), and the put and get sessions behind the ranged ones.
#include <mutex>

#include "capi/compat_store.h"
#include "capi/compat_store_internal.h"

namespace kvpool::compat {

using store_internal::Code;
using store_internal::kInvalid;

namespace {

// The items of a batch with a buffer and a non-negative size, with their
// positions; the others keep their INVALID_PARAMS answer.
template <typename Ptr>
struct ValidItems {
  ValidItems() = default;
  ValidItems(const std::vector<std::string>& all_keys,
             const std::vector<Ptr>& all_bufs,
             const std::vector<int64_t>& all_sizes) {
    for (size_t i = 0; i < all_keys.size(); ++i) {
      if (all_bufs[i] == nullptr || all_sizes[i] < 0) continue;
      keys.push_back(all_keys[i]);
      bufs.push_back(all_bufs[i]);
      sizes.push_back(static_cast<uint64_t>(all_sizes[i]));
      index.push_back(i);
    }
  }
  std::vector<std::string> keys;
  std::vector<Ptr> bufs;
  std::vector<uint64_t> sizes;
  std::vector<size_t> index;
};

// One key's buffers and sizes (and object offsets) in the client's form;
// false when the lists differ in length or hold a null buffer or a
// negative number.
template <typename P>
bool ToSlices(const std::vector<P>& bufs, const std::vector<int64_t>& sizes,
              std::vector<ConstSlice>* out, uint64_t* total) {
  if (bufs.size() != sizes.size()) return false;
  for (size_t j = 0; j < bufs.size(); ++j) {
    if (bufs[j] == nullptr || sizes[j] < 0) return false;
    out->push_back({bufs[j], static_cast<uint64_t>(sizes[j])});
    *total += static_cast<uint64_t>(sizes[j]);
  }
  return true;
}

template <typename P>
bool ToRanges(const std::vector<P>& bufs, const std::vector<int64_t>& sizes,
              const std::vector<int64_t>& offsets,
              std::vector<ValueRange>* out) {
  if (bufs.size() != sizes.size() || offsets.size() != sizes.size())
    return false;
  for (size_t j = 0; j < bufs.size(); ++j) {
    if (bufs[j] == nullptr || sizes[j] < 0 || offsets[j] < 0) return false;
    out->push_back({static_cast<uint64_t>(offsets[j]),
                    const_cast<void*>(static_cast<const void*>(bufs[j])),
                    static_cast<uint64_t>(sizes[j])});
  }
  return true;
}

}  // namespace

int MooncakeStore::RegisterBuffer(void* buf, int64_t size) {
  if (buf == nullptr || size <= 0) return kInvalid;
  ReaderLock lock(&mu_);
  if (!client_) return kInvalid;
  MutexLock reg(&reg_mu_);
  if (Status s = client_->RegisterBuffer(buf, static_cast<uint64_t>(size));
      !s.ok()) {
    return Code(s);
  }
  registered_[reinterpret_cast<uintptr_t>(buf)] = static_cast<uint64_t>(size);
  return 0;
}

int MooncakeStore::UnregisterBuffer(void* buf) {
  ReaderLock lock(&mu_);
  if (!client_) return kInvalid;
  MutexLock reg(&reg_mu_);
  if (Status s = client_->UnregisterBuffer(buf); !s.ok()) return Code(s);
  registered_.erase(reinterpret_cast<uintptr_t>(buf));
  return 0;
}

uint64_t MooncakeStore::RegisteredCapacity(const void* p) const {
  MutexLock reg(&reg_mu_);
  auto a = reinterpret_cast<uintptr_t>(p);
  auto it = registered_.upper_bound(a);
  if (it == registered_.begin()) return 0;
  --it;
  if (a - it->first >= it->second) return 0;
  return it->second - (a - it->first);
}

int MooncakeStore::PutFrom(std::string_view key, const void* buf, int64_t size,
                           const MooncakeReplicateConfig& rc) {
  return BatchPutFrom({std::string(key)}, {buf}, {size}, rc)[0];
}

std::vector<int> MooncakeStore::BatchPutFrom(
    const std::vector<std::string>& keys, const std::vector<const void*>& bufs,
    const std::vector<int64_t>& sizes, const MooncakeReplicateConfig& rc) {
  std::vector<int> out(keys.size(), kInvalid);
  if (bufs.size() != keys.size() || sizes.size() != keys.size()) return out;
  ReaderLock lock(&mu_);
  if (!client_) return out;
  auto cfg = ToReplicateConfig(rc);
  if (!cfg.ok()) {
    std::fill(out.begin(), out.end(), Code(cfg.status()));
    return out;
  }
  ValidItems<const void*> v(keys, bufs, sizes);
  // As Mooncake, an empty value is a successful put that stores nothing.
  ValidItems<const void*> nonempty;
  for (size_t j = 0; j < v.keys.size(); ++j) {
    if (v.sizes[j] == 0) {
      out[v.index[j]] = 0;
      continue;
    }
    nonempty.keys.push_back(v.keys[j]);
    nonempty.bufs.push_back(v.bufs[j]);
    nonempty.sizes.push_back(v.sizes[j]);
    nonempty.index.push_back(v.index[j]);
  }
  if (nonempty.keys.empty()) return out;
  auto r = client_->BatchPutFrom(nonempty.keys, nonempty.bufs, nonempty.sizes,
                                 cfg.value());
  const auto& idx = nonempty.index;
  for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] = Code(r[j]);
  return out;
}

std::vector<int> MooncakeStore::BatchUpsertFrom(
    const std::vector<std::string>& keys, const std::vector<const void*>& bufs,
    const std::vector<int64_t>& sizes, const MooncakeReplicateConfig& rc) {
  if (bufs.size() != keys.size() || sizes.size() != keys.size()) {
    return std::vector<int>(keys.size(), kInvalid);
  }
  std::vector<std::vector<const void*>> b(keys.size());
  std::vector<std::vector<int64_t>> n(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    b[i] = {bufs[i]};
    n[i] = {sizes[i]};
  }
  return BatchPutFromMultiBuffers(keys, b, n, rc, /*upsert=*/true);
}

int MooncakeStore::PutFromWithMetadata(std::string_view key, const void* buf,
                                       const void* metadata, int64_t size,
                                       int64_t metadata_size,
                                       const MooncakeReplicateConfig& rc) {
  return BatchPutFromMultiBuffers({std::string(key)}, {{metadata, buf}},
                                  {{metadata_size, size}}, rc)[0];
}

std::vector<int> MooncakeStore::BatchPutFromMultiBuffers(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<const void*>>& bufs,
    const std::vector<std::vector<int64_t>>& sizes,
    const MooncakeReplicateConfig& rc, bool upsert) {
  std::vector<int> out(keys.size(), kInvalid);
  if (bufs.size() != keys.size() || sizes.size() != keys.size()) return out;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (bufs[i].size() != sizes[i].size()) return out;  // all fail
  }
  ReaderLock lock(&mu_);
  if (!client_) return out;
  auto cfg = ToReplicateConfig(rc);
  if (!cfg.ok()) {
    std::fill(out.begin(), out.end(), Code(cfg.status()));
    return out;
  }
  std::vector<std::string> k;
  std::vector<std::vector<ConstSlice>> parts;
  std::vector<size_t> idx;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<ConstSlice> p;
    uint64_t total = 0;
    if (!ToSlices(bufs[i], sizes[i], &p, &total)) continue;
    if (total == 0) {  // as Mooncake: nothing to store, and no error
      out[i] = 0;
      continue;
    }
    k.push_back(keys[i]);
    parts.push_back(std::move(p));
    idx.push_back(i);
  }
  if (k.empty()) return out;
  auto r = client_->BatchPutFromParts(k, parts, cfg.value(), upsert);
  for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] = Code(r[j]);
  return out;
}

std::vector<int64_t> MooncakeStore::BatchGetIntoMultiBuffers(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<void*>>& bufs,
    const std::vector<std::vector<int64_t>>& sizes) {
  std::vector<int64_t> out(keys.size(), kInvalid);
  if (bufs.size() != keys.size() || sizes.size() != keys.size()) return out;
  ReaderLock lock(&mu_);
  if (!client_) return out;
  std::vector<std::string> k;
  std::vector<std::vector<ConstSlice>> dst;
  std::vector<size_t> idx;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<ConstSlice> d;
    uint64_t total = 0;
    if (!ToSlices(bufs[i], sizes[i], &d, &total)) continue;
    k.push_back(keys[i]);
    dst.push_back(std::move(d));
    idx.push_back(i);
  }
  if (k.empty()) return out;
  auto r = client_->BatchGetIntoParts(k, dst);
  for (size_t j = 0; j < idx.size(); ++j) {
    out[idx[j]] =
        r[j].ok() ? static_cast<int64_t>(r[j].value()) : Code(r[j].status());
  }
  return out;
}

std::vector<int64_t> MooncakeStore::BatchGetIntoMultiBufferRanges(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<void*>>& bufs,
    const std::vector<std::vector<int64_t>>& sizes,
    const std::vector<std::vector<int64_t>>& offsets) {
  std::vector<int64_t> out(keys.size(), kInvalid);
  if (bufs.size() != keys.size() || sizes.size() != keys.size() ||
      offsets.size() != keys.size()) {
    return out;
  }
  ReaderLock lock(&mu_);
  if (!client_) return out;
  std::vector<std::string> k;
  std::vector<std::vector<ValueRange>> ranges;
  std::vector<size_t> idx;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<ValueRange> r;
    if (!ToRanges(bufs[i], sizes[i], offsets[i], &r)) continue;
    k.push_back(keys[i]);
    ranges.push_back(std::move(r));
    idx.push_back(i);
  }
  if (k.empty()) return out;
  // Keys with an open get session read under its lease; others look up now.
  std::vector<bool> in_session(k.size());
  {
    MutexLock sl(&session_mu_);
    for (size_t j = 0; j < k.size(); ++j)
      in_session[j] = get_sessions_.count(k[j]) > 0;
  }
  std::vector<std::string> ks[2];
  std::vector<std::vector<ValueRange>> rs[2];
  std::vector<size_t> at[2];
  for (size_t j = 0; j < k.size(); ++j) {
    const int g = in_session[j] ? 1 : 0;
    ks[g].push_back(k[j]);
    rs[g].push_back(std::move(ranges[j]));
    at[g].push_back(idx[j]);
  }
  for (int g = 0; g < 2; ++g) {
    if (ks[g].empty()) continue;
    auto r = g == 1 ? client_->BatchGetSessionRead(ks[g], rs[g])
                    : client_->BatchGetRanges(ks[g], rs[g]);
    for (size_t j = 0; j < at[g].size(); ++j) {
      out[at[g][j]] =
          r[j].ok() ? static_cast<int64_t>(r[j].value()) : Code(r[j].status());
    }
  }
  return out;
}

std::vector<int> MooncakeStore::BatchPutSessionStart(
    const std::vector<std::string>& keys, const std::vector<int64_t>& sizes,
    const MooncakeReplicateConfig& rc) {
  std::vector<int> out(keys.size(), kInvalid);
  if (sizes.size() != keys.size()) return out;
  ReaderLock lock(&mu_);
  if (!client_) return out;
  auto cfg = ToReplicateConfig(rc);
  if (!cfg.ok()) {
    std::fill(out.begin(), out.end(), Code(cfg.status()));
    return out;
  }
  std::vector<std::string> k;
  std::vector<uint64_t> n;
  std::vector<size_t> idx;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (sizes[i] <= 0) continue;
    k.push_back(keys[i]);
    n.push_back(static_cast<uint64_t>(sizes[i]));
    idx.push_back(i);
  }
  auto r = client_->BatchPutSessionStart(k, n, cfg.value());
  for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] = Code(r[j]);
  return out;
}

std::vector<int64_t> MooncakeStore::BatchPutFromMultiBufferRanges(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<const void*>>& bufs,
    const std::vector<std::vector<int64_t>>& sizes,
    const std::vector<std::vector<int64_t>>& offsets) {
  std::vector<int64_t> out(keys.size(), kInvalid);
  if (bufs.size() != keys.size() || sizes.size() != keys.size() ||
      offsets.size() != keys.size()) {
    return out;
  }
  ReaderLock lock(&mu_);
  if (!client_) return out;
  std::vector<std::string> k;
  std::vector<std::vector<ValueRange>> ranges;
  std::vector<size_t> idx;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<ValueRange> r;
    if (!ToRanges(bufs[i], sizes[i], offsets[i], &r)) continue;
    k.push_back(keys[i]);
    ranges.push_back(std::move(r));
    idx.push_back(i);
  }
  if (k.empty()) return out;
  auto r = client_->BatchPutSessionWrite(k, ranges);
  for (size_t j = 0; j < idx.size(); ++j) {
    out[idx[j]] =
        r[j].ok() ? static_cast<int64_t>(r[j].value()) : Code(r[j].status());
  }
  return out;
}

std::vector<int> MooncakeStore::BatchPutSessionEnd(
    const std::vector<std::string>& keys) {
  std::vector<int> out(keys.size(), kInvalid);
  ReaderLock lock(&mu_);
  if (!client_) return out;
  auto r = client_->BatchPutSessionEnd(keys);
  for (size_t i = 0; i < keys.size(); ++i) out[i] = Code(r[i]);
  return out;
}

std::vector<int> MooncakeStore::BatchPutSessionRevoke(
    const std::vector<std::string>& keys) {
  std::vector<int> out(keys.size(), kInvalid);
  ReaderLock lock(&mu_);
  if (!client_) return out;
  auto r = client_->BatchPutSessionRevoke(keys);
  for (size_t i = 0; i < keys.size(); ++i) out[i] = Code(r[i]);
  return out;
}

std::vector<int> MooncakeStore::BatchGetSessionStart(
    const std::vector<std::string>& keys) {
  std::vector<int> out(keys.size(), kInvalid);
  ReaderLock lock(&mu_);
  if (!client_) return out;
  auto r = client_->BatchGetSessionStart(keys);
  MutexLock sl(&session_mu_);
  for (size_t i = 0; i < keys.size(); ++i) {
    out[i] = Code(r[i]);
    if (r[i].ok()) {
      get_sessions_.insert(keys[i]);
    } else {
      get_sessions_.erase(keys[i]);
    }
  }
  return out;
}

int MooncakeStore::BatchGetSessionEnd(const std::vector<std::string>& keys) {
  ReaderLock lock(&mu_);
  if (!client_) return kInvalid;
  {
    MutexLock sl(&session_mu_);
    for (const auto& k : keys) get_sessions_.erase(k);
  }
  return Code(client_->BatchGetSessionEnd(keys));
}

int64_t MooncakeStore::GetInto(std::string_view key, void* buf, int64_t size) {
  return BatchGetInto({std::string(key)}, {buf}, {size})[0];
}

std::vector<int64_t> MooncakeStore::BatchGetInto(
    const std::vector<std::string>& keys, const std::vector<void*>& bufs,
    const std::vector<int64_t>& sizes) {
  std::vector<int64_t> out(keys.size(), kInvalid);
  if (bufs.size() != keys.size() || sizes.size() != keys.size()) return out;
  ReaderLock lock(&mu_);
  if (!client_) return out;
  ValidItems<void*> v(keys, bufs, sizes);
  if (v.keys.empty()) return out;
  const auto& idx = v.index;
  // BatchGetInto rejects buffers outside registered ones (INVALID_PARAMS).
  auto r = client_->BatchGetInto(v.keys, v.bufs, v.sizes);
  for (size_t j = 0; j < idx.size(); ++j) {
    out[idx[j]] =
        r[j].ok() ? static_cast<int64_t>(r[j].value()) : Code(r[j].status());
  }
  return out;
}

MooncakeStore::Ranges MooncakeStore::GetIntoRanges(
    const std::vector<void*>& bufs,
    const std::vector<std::vector<std::string>>& keys,
    const Ranges& dst_offsets, const Ranges& src_offsets, const Ranges& sizes) {
  // results[i][j] has one entry per fragment where the request is well
  // formed, so a bad entry fails alone (Mooncake reports per-entry errors
  // the same way); a key whose lists differ in length gets one error.
  Ranges out(keys.size());
  const size_t nb = keys.size();
  const bool shaped = bufs.size() == nb && dst_offsets.size() == nb &&
                      src_offsets.size() == nb && sizes.size() == nb;
  for (size_t i = 0; i < nb; ++i) {
    out[i].resize(keys[i].size());
    for (size_t j = 0; j < keys[i].size(); ++j) {
      const bool ok = shaped && dst_offsets[i].size() == keys[i].size() &&
                      src_offsets[i].size() == keys[i].size() &&
                      sizes[i].size() == keys[i].size() &&
                      dst_offsets[i][j].size() == sizes[i][j].size() &&
                      src_offsets[i][j].size() == sizes[i][j].size();
      out[i][j].assign(ok ? sizes[i][j].size() : 1, kInvalid);
    }
  }
  if (!shaped) return out;
  ReaderLock lock(&mu_);
  if (!client_) return out;
  // Every fragment that fits its buffer, grouped by key so that each key is
  // looked up once and only the fragments are read.
  struct Where {
    size_t i, j, k;
  };
  std::vector<std::string> unique;
  std::unordered_map<std::string, size_t> pos;
  std::vector<std::vector<ValueRange>> ranges;
  std::vector<std::vector<Where>> where;
  for (size_t i = 0; i < nb; ++i) {
    const uint64_t cap = bufs[i] ? RegisteredCapacity(bufs[i]) : 0;
    for (size_t j = 0; j < keys[i].size(); ++j) {
      if (out[i][j].size() != sizes[i][j].size()) continue;  // malformed
      const auto& d = dst_offsets[i][j];
      const auto& src = src_offsets[i][j];
      const auto& n = sizes[i][j];
      for (size_t k = 0; k < n.size(); ++k) {
        if (cap == 0 || d[k] < 0 || src[k] < 0 || n[k] < 0 ||
            static_cast<uint64_t>(d[k]) > cap ||
            static_cast<uint64_t>(n[k]) > cap - d[k]) {
          continue;  // stays INVALID_PARAMS: outside the buffer
        }
        auto [it, fresh] = pos.emplace(keys[i][j], unique.size());
        if (fresh) {
          unique.push_back(keys[i][j]);
          ranges.emplace_back();
          where.emplace_back();
        }
        ranges[it->second].push_back(ValueRange{
            static_cast<uint64_t>(src[k]), static_cast<char*>(bufs[i]) + d[k],
            static_cast<uint64_t>(n[k])});
        where[it->second].push_back(Where{i, j, k});
      }
    }
  }
  if (unique.empty()) return out;
  std::vector<std::vector<bool>> outside;
  auto r = client_->BatchGetRanges(unique, ranges, &outside);
  for (size_t u = 0; u < unique.size(); ++u) {
    for (size_t f = 0; f < where[u].size(); ++f) {
      const Where& w = where[u][f];
      int64_t& slot = out[w.i][w.j][w.k];
      if (!r[u].ok()) {
        slot = Code(r[u].status());
      } else if (!outside[u][f]) {
        slot = static_cast<int64_t>(ranges[u][f].length);
      }  // else: past the end of the value, stays INVALID_PARAMS
    }
  }
  return out;
}

}  // namespace kvpool::compat
