#include "client/data_plane.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "client/op_metrics.h"
#include "common/host_id.h"
#include "transport/local_holders.h"
#include "transport/local_segments.h"

namespace kvpool {

DataPlane::DataPlane(TransportMode mode,
                     const TcpDataClientOptions& tcp_options,
                     const Clock* clock)
    : mode_(mode), clock_(clock), tcp_(tcp_options) {}

std::shared_ptr<const ShmSegment> DataPlane::MapShm(
    const rpc::MemoryLocation& loc) {
  const int64_t now = clock_->NowMs();
  MutexLock lock(&shm_mu_);
  // Keyed by path and segment id: a node restarted in the same process
  // re-creates its file under the same name, and a mapping of the old
  // (unlinked) file must never serve the new segment's replicas.
  const auto key = std::make_pair(loc.shm_path(), loc.segment_id());
  auto it = shm_maps_.find(key);
  if (it != shm_maps_.end() && it->second.seg->size() == loc.segment_size()) {
    it->second.last_used_ms = now;
    return it->second.seg;
  }
  // A node of this process: its own mapping (no second one to populate).
  std::shared_ptr<const ShmSegment> mapped =
      FindLocalSegment(loc.shm_path(), loc.segment_size());
  if (!mapped) {
    // Shared with the other clients of this process: one set of page
    // tables per process (transport/local_segments.h).
    auto seg = SharedView(loc.shm_path(), loc.segment_id(), loc.segment_size());
    if (!seg.ok()) {
      if (mode_ == TransportMode::kAuto) {
        std::call_once(shm_fallback_logged_, [&] {
          spdlog::warn("cannot map {} ({}); same-host segments will use TCP",
                       loc.shm_path(), seg.status().ToString());
        });
      }
      return nullptr;
    }
    mapped = std::move(seg.value());
  }
  // Other mounts of this file are older (a segment id is never reused):
  // no new reply names them, so let them go; copies in progress and cached
  // leases that still hold one keep it mapped until they end.
  for (auto m = shm_maps_.begin(); m != shm_maps_.end();) {
    m = m->first.first == loc.shm_path() ? shm_maps_.erase(m) : std::next(m);
  }
  auto& slot = shm_maps_[key];
  slot.seg = std::move(mapped);
  slot.last_used_ms = now;
  return slot.seg;
}

void DataPlane::DropIdleMappings(int64_t idle_ms) {
  const int64_t now = clock_->NowMs();
  MutexLock lock(&shm_mu_);
  for (auto m = shm_maps_.begin(); m != shm_maps_.end();) {
    m = now - m->second.last_used_ms >= idle_ms ? shm_maps_.erase(m)
                                                : std::next(m);
  }
}

size_t DataPlane::mapped_segments() const {
  MutexLock lock(&shm_mu_);
  return shm_maps_.size();
}

void DataPlane::MaybeSweep() {
  const int64_t now = clock_->NowMs();
  int64_t next = next_sweep_ms_.load(std::memory_order_relaxed);
  if (now < next || !next_sweep_ms_.compare_exchange_strong(next, now + 5000))
    return;
  DropIdleMappings(kIdleUnmapMs);
}

const uint8_t* DataPlane::ResolveShm(const rpc::MemoryLocation& loc,
                                     uint64_t length,
                                     std::shared_ptr<const ShmSegment>* hold) {
  TransferItem item{.loc = &loc, .length = length};
  uint8_t* p = nullptr;
  return Choose(item, &p, hold) == Path::kShm ? p : nullptr;
}

DataPlane::Path DataPlane::Choose(TransferItem& item, uint8_t** shm_ptr,
                                  std::shared_ptr<const ShmSegment>* hold) {
  const auto& loc = *item.loc;
  // The master granted [offset, offset+length) of this segment: never touch
  // bytes outside it, whatever the descriptor says.
  if (item.length != loc.length() || loc.offset() > loc.segment_size() ||
      loc.length() > loc.segment_size() - loc.offset()) {
    item.result = ErrorCode::INVALID_REPLICA;
    return Path::kInvalid;
  }
  for (const auto& piece : item.pieces) {
    if (piece.buf == nullptr || piece.value_offset > item.length ||
        piece.length > item.length - piece.value_offset) {
      item.result = ErrorCode::INVALID_PARAMS;
      return Path::kInvalid;
    }
  }
  bool same_host = !loc.shm_path().empty() && loc.host_id() == LocalHostId();
  if (mode_ != TransportMode::kTcp && same_host) {
    if (auto seg = MapShm(loc)) {
      seg->Prepare(loc.offset(), loc.length());
      *shm_ptr = const_cast<uint8_t*>(seg->data()) + loc.offset();
      *hold = std::move(seg);
      return Path::kShm;
    }
  }
  if (mode_ == TransportMode::kShm) {
    item.result = ErrorCode::TRANSFER_FAIL;
    return Path::kInvalid;
  }
  return Path::kTcp;
}

template <typename Op>
void DataPlane::Transfer(std::vector<TransferItem>& items, bool write) {
  // Grouped per (endpoint, node id): the data server proves it is the node
  // the master named, so a port reused by another process is never read.
  std::map<std::pair<std::string, std::string>,
           std::vector<std::pair<Op, TransferItem*>>>
      by_node;
  MaybeSweep();
  // The whole value is one piece at offset 0.
  auto pieces_of = [](const TransferItem& item, const ValuePiece* whole) {
    return item.pieces.empty() ? std::span<const ValuePiece>(whole, 1)
                               : item.pieces;
  };
  auto queue_tcp = [&](TransferItem& item) {
    MarkDataPath(kPathTcp);
    const ValuePiece whole{0, item.buf, item.length};
    // One range per piece, each under the grant of the whole value.
    auto& node_ops = by_node[{item.loc->data_endpoint(), item.loc->node_id()}];
    for (const auto& piece : pieces_of(item, &whole)) {
      Op op;
      op.segment_id = item.loc->segment_id();
      op.offset = item.loc->offset() + piece.value_offset;
      op.length = piece.length;
      op.grant = GrantOf(*item.loc);
      if constexpr (std::is_same_v<Op, ReadOp>) {
        op.dest = piece.buf;
      } else {
        op.src = piece.buf;
      }
      node_ops.emplace_back(op, &item);
    }
  };
  // Writes copied into shared memory, with the mapping each went to.
  std::vector<std::pair<TransferItem*, std::shared_ptr<const ShmSegment>>>
      shm_written;
  for (auto& item : items) {
    item.result = ErrorCode::OK;
    uint8_t* p = nullptr;
    std::shared_ptr<const ShmSegment> hold;  // mapped until the copy is done
    Path path = Choose(item, &p, &hold);
    if (path == Path::kShm) {
      MarkDataPath(kPathShm);
      const ValuePiece whole{0, item.buf, item.length};
      for (const auto& piece : pieces_of(item, &whole)) {
        if (write) {
          std::memcpy(p + piece.value_offset, piece.buf, piece.length);
          shm_bytes_written += piece.length;
        } else {
          std::memcpy(piece.buf, p + piece.value_offset, piece.length);
          shm_bytes_read += piece.length;
        }
      }
      if (write) shm_written.emplace_back(&item, std::move(hold));
    } else if (path == Path::kTcp) {
      queue_tcp(item);
    }
  }
  // A write copied into a node's memory is acknowledged only if the node
  // still owns that memory after the copy: one that died (kill -9) before
  // the master noticed leaves its mapping writable here, and the master
  // would commit a value that dies with the node. Asked once per segment
  // per batch (one fcntl). With shared memory forced, the write fails
  // (TRANSFER_FAIL: the put retries on another node); otherwise it goes
  // over TCP, where a dead node fails the same way and a live node whose
  // segment has no owner lock (a node from before the lock) takes it.
  std::vector<std::pair<const ShmSegment*, bool>> owner_alive;
  for (auto& written : shm_written) {
    const ShmSegment* seg = written.second.get();
    auto known = std::find_if(owner_alive.begin(), owner_alive.end(),
                              [seg](const auto& a) { return a.first == seg; });
    if (known == owner_alive.end()) {
      owner_alive.emplace_back(seg, seg->OwnerAlive());
      known = std::prev(owner_alive.end());
    }
    if (known->second) continue;
    shm_writes_owner_gone.fetch_add(1, std::memory_order_relaxed);
    if (mode_ == TransportMode::kShm) {
      written.first->result = ErrorCode::TRANSFER_FAIL;
    } else {
      queue_tcp(*written.first);
    }
  }
  for (auto& [node, pairs] : by_node) {
    const auto& [endpoint, node_id] = node;
    std::vector<Op> ops;
    ops.reserve(pairs.size());
    for (auto& pr : pairs) ops.push_back(pr.first);
    Status s;
    if constexpr (std::is_same_v<Op, ReadOp>) {
      s = tcp_.Read(endpoint, node_id, ops);
    } else {
      s = tcp_.Write(endpoint, node_id, ops);
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      ErrorCode r = s.ok() ? ops[i].result : ErrorCode::TRANSFER_FAIL;
      // An item of several pieces fails with its first failed piece.
      if (pairs[i].second->result == ErrorCode::OK) pairs[i].second->result = r;
      if (r == ErrorCode::OK)
        (write ? tcp_bytes_written : tcp_bytes_read) += ops[i].length;
    }
  }
}

void DataPlane::Read(std::vector<TransferItem>& items) {
  Transfer<ReadOp>(items, false);
}

void DataPlane::ReadKeys(
    std::vector<KeyReadOp>& ops,
    const std::vector<std::pair<std::string, std::string>>& peers) {
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> by_peer;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (peers[i].first.empty() || peers[i].second.empty()) {
      ops[i].result = ErrorCode::INVALID_REPLICA;  // the holder is unknown
      continue;
    }
    by_peer[peers[i]].push_back(i);
  }
  if (!by_peer.empty()) MarkDataPath(kPathSsd);
  // A holder in this very process reads its own SSD: no socket.
  if (mode_ != TransportMode::kTcp) {
    for (auto it = by_peer.begin(); it != by_peer.end();) {
      auto tier = FindLocalHolder(it->first.second);
      if (!tier) {
        ++it;
        continue;
      }
      std::vector<KeyReadOp> batch;
      for (size_t i : it->second) batch.push_back(std::move(ops[i]));
      tier->ServeReads(batch);
      for (size_t k = 0; k < it->second.size(); ++k) {
        ops[it->second[k]] = std::move(batch[k]);
        if (ops[it->second[k]].result == ErrorCode::OK) {
          ssd_bytes_read += ops[it->second[k]].length;
          local_ssd_bytes_read += ops[it->second[k]].length;
        }
      }
      it = by_peer.erase(it);
    }
  }
  for (auto& [peer, idx] : by_peer) {
    std::vector<KeyReadOp> batch;
    batch.reserve(idx.size());
    for (size_t i : idx) batch.push_back(std::move(ops[i]));
    Status s = tcp_.ReadKeys(peer.first, peer.second, batch);
    for (size_t k = 0; k < idx.size(); ++k) {
      ops[idx[k]] = std::move(batch[k]);
      if (!s.ok()) ops[idx[k]].result = ErrorCode::TRANSFER_FAIL;
      if (ops[idx[k]].result == ErrorCode::OK)
        ssd_bytes_read += ops[idx[k]].length;
    }
  }
}
void DataPlane::Write(std::vector<TransferItem>& items) {
  Transfer<WriteOp>(items, true);
}

}  // namespace kvpool
