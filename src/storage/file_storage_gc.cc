// FileStorage's garbage collection: choose the sealed files worth
// collecting, move their live records (in bounded chunks) into the active
// file through the write path, then delete the files; and the background
// thread that runs it. One of the files of the FileStorage class
// (file_storage.cc lists them).
#include <errno.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "storage/file_storage.h"
#include "storage/file_storage_internal.h"
#include "storage/record_format.h"

namespace kvpool {

using storage::AlignedBuffer;
using storage::IndexEntry;
using storage::IoError;
using storage::IoOp;
using storage::IoRequest;
using storage::kBlockSize;
using storage::ObjectOf;
using storage::RecordKind;
using storage::RecordSpan;
using storage::SegmentFile;

namespace {

// GC moves records in chunks so that its buffers stay bounded.
constexpr size_t kGcChunkRecords = 32;
constexpr uint64_t kGcChunkBytes = 64ull << 20;

uint64_t DeadBytes(const SegmentFile& f) {
  return f.used_bytes - std::min(f.live_bytes.load(), f.used_bytes);
}

}  // namespace

Status FileStorage::CollectGarbage() {
  std::lock_guard<std::mutex> gc_lock(gc_mu_);
  gc_runs_.fetch_add(1);
  const std::vector<std::shared_ptr<SegmentFile>> chosen =
      ChooseFilesToCollect();
  if (chosen.empty()) return Status::OK();

  std::unordered_map<const SegmentFile*, size_t> pos;
  for (size_t i = 0; i < chosen.size(); ++i) pos[chosen[i].get()] = i;
  std::vector<NamedRecords> live(chosen.size());
  index_.ForEach(
      [&](std::string_view tenant, std::string_view key, const IndexEntry& e) {
        auto it = pos.find(e.file.get());
        if (it == pos.end()) return;
        live[it->second].push_back({ObjectOf(tenant, key, e), e});
      });
  Status first_error;
  for (size_t i = 0; i < chosen.size(); ++i) {
    Status st = CollectFile(chosen[i], std::move(live[i]));
    if (!st.ok() && first_error.ok()) first_error = st;
  }
  return first_error;
}

std::vector<std::shared_ptr<SegmentFile>> FileStorage::ChooseFilesToCollect() {
  std::vector<std::shared_ptr<SegmentFile>> chosen;
  std::lock_guard<std::mutex> lock(files_mu_);
  std::vector<std::shared_ptr<SegmentFile>> others;
  uint64_t projected = bytes_used_;
  for (auto& [id, f] : files_) {
    // Files still taking appends, or with appends in flight, are never
    // collected: a record could land after its file was judged.
    if (f == active_ || !f->sealed || f->inflight_writes > 0) continue;
    const uint64_t dead = DeadBytes(*f);
    if (dead == 0) continue;
    if (double(dead) >= config_.ssd_gc_dead_ratio * double(f->used_bytes)) {
      chosen.push_back(f);
      projected -= dead;
    } else {
      others.push_back(f);
    }
  }
  // Under pressure, also the files with the most dead bytes until the low
  // watermark is reached.
  const double cap = double(config_.ssd_capacity_bytes);
  if (double(bytes_used_) > config_.ssd_high_watermark_ratio * cap) {
    std::sort(others.begin(), others.end(), [&](const auto& a, const auto& b) {
      return DeadBytes(*a) > DeadBytes(*b);
    });
    for (auto& f : others) {
      if (double(projected) <= config_.ssd_low_watermark_ratio * cap) break;
      projected -= DeadBytes(*f);
      chosen.push_back(f);
    }
  }
  return chosen;
}

Status FileStorage::CollectFile(const std::shared_ptr<SegmentFile>& file,
                                NamedRecords live) {
  std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) {
    return a.second.offset < b.second.offset;
  });
  size_t next = 0;
  while (next < live.size()) {
    size_t end = next;
    uint64_t bytes = 0;
    while (end < live.size() && end - next < kGcChunkRecords &&
           (end == next || bytes + live[end].second.span() <= kGcChunkBytes)) {
      bytes += live[end].second.span();
      ++end;
    }
    if (Status st =
            MoveRecords(*file, std::span(live).subspan(next, end - next));
        !st.ok()) {
      return st;
    }
    next = end;
  }

  if (uint64_t left = file->live_bytes.load(); left != 0) {
    spdlog::warn("SSD tier: {} still holds {} live bytes after collection",
                 file->path(), left);
    return Status::OK();
  }
  return DeleteCollectedFile(*file);
}

Status FileStorage::MoveRecords(SegmentFile& file,
                                std::span<const NamedRecord> chunk) {
  // Read the chunk's records, whole (header and value), in one batch.
  std::vector<AlignedBuffer> bufs;
  std::vector<IoRequest> reqs;
  for (const auto& [obj, e] : chunk) {
    bufs.emplace_back(e.span());
    IoRequest q;
    q.op = IoOp::kRead;
    q.fd = file.fd();
    q.offset = e.offset;
    q.Add(bufs.back().data(), e.span());
    reqs.push_back(q);
  }
  io_->Submit(reqs);

  std::vector<PendingRecord> recs;
  std::vector<size_t> from;  // index into chunk of each rec
  for (size_t k = 0; k < chunk.size(); ++k) {
    const auto& [obj, e] = chunk[k];
    const IoRequest& q = reqs[k];
    if (q.result != int64_t(q.length())) {
      read_errors_.fetch_add(1);
      return Status(ErrorCode::FILE_READ_FAIL,
                    "garbage collection of " + file.path() + ": " +
                        IoError(q.result, q.length()));
    }
    const uint8_t* b = bufs[k].data();
    auto parsed = storage::ParseHeaderBlock(b, file.id(), e.offset);
    if (parsed.ok() && parsed->kind() == RecordKind::kDead) continue;
    if (!parsed.ok() || parsed->header.seq != e.seq ||
        parsed->object_version != e.object_version ||
        storage::DataChecksum(b + kBlockSize, e.value_len) != e.data_checksum) {
      // Never copy damage forward: the key becomes a miss instead. (If
      // the key moved on meanwhile, this was a header being marked dead.)
      if (index_.RemoveIf(obj.tenant, obj.key, e)) {
        DropLive(e);
        corrupt_reads_.fetch_add(1);
      }
      continue;
    }
    PendingRecord r;
    r.tenant = obj.tenant;
    r.key = obj.key;
    r.data = b + kBlockSize;
    r.len = e.value_len;
    r.checksum = e.data_checksum;
    r.seq = e.seq;  // the age survives the move
    r.object_version = e.object_version;
    recs.push_back(std::move(r));
    from.push_back(k);
  }
  // Collection may overshoot the capacity by what it moves: it must be
  // able to run on a full disk, and it frees more than it takes.
  Reserve(recs, /*over_capacity_ok=*/true);
  WriteRecords(recs);
  return PublishMoves(file, chunk, recs, from);
}

Status FileStorage::PublishMoves(SegmentFile& file,
                                 std::span<const NamedRecord> chunk,
                                 std::span<PendingRecord> recs,
                                 const std::vector<size_t>& from) {
  Status failed;
  NamedRecords lost;
  for (size_t j = 0; j < recs.size(); ++j) {
    PendingRecord& r = recs[j];
    const auto& [obj, old] = chunk[from[j]];
    if (!r.status.ok()) {
      if (failed.ok()) failed = r.status;
    } else {
      // As in BatchWrite: live before visible.
      r.file->live_bytes.fetch_add(RecordSpan(r.len));
      if (index_.ReplaceIf(obj.tenant, obj.key, old, r.Entry())) {
        file.live_bytes.fetch_sub(old.span());
        gc_records_moved_.fetch_add(1);
      } else {
        // Removed or rewritten meanwhile: the copy must not come back.
        r.file->live_bytes.fetch_sub(RecordSpan(r.len));
        lost.push_back({obj, r.Entry()});
      }
    }
    if (r.file) ReleaseReservation(r.file.get());
  }
  Invalidate(lost);
  return failed;
}

Status FileStorage::DeleteCollectedFile(SegmentFile& file) {
  uint64_t freed;
  {
    std::lock_guard<std::mutex> lock(files_mu_);
    // Unlinking first keeps the file in the table if the unlink fails, so
    // that its records cannot come back after a restart unaccounted for.
    if (::unlink(file.path().c_str()) != 0 && errno != ENOENT) {
      return Status(ErrorCode::FILE_WRITE_FAIL,
                    "unlink " + file.path() + ": " + std::strerror(errno));
    }
    freed = file.used_bytes;
    bytes_used_ -= freed;
    files_.erase(file.id());
  }
  gc_files_deleted_.fetch_add(1);
  gc_bytes_reclaimed_.fetch_add(freed);
  return Status::OK();
}

void FileStorage::GcLoop() {
  std::unique_lock<std::mutex> lock(gc_thread_mu_);
  while (!stopping_) {
    gc_cv_.wait_for(lock, std::chrono::milliseconds(config_.ssd_gc_interval_ms),
                    [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    if (Status st = CollectGarbage(); !st.ok()) {
      spdlog::warn("SSD tier garbage collection: {}", st.ToString());
    }
    lock.lock();
  }
}

}  // namespace kvpool
