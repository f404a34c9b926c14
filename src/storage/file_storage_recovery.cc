// FileStorage's start-up: every segment file in the directory is scanned
// (storage/segment_scanner.h) and its records rebuild the index; files left
// without a live record are deleted, and versions of a key that lost to a
// newer one are marked dead. One of the files of the FileStorage class
// (file_storage.cc lists them).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <unordered_set>

#include "storage/file_storage.h"
#include "storage/file_storage_internal.h"
#include "storage/segment_scanner.h"

namespace kvpool {

using storage::IndexEntry;
using storage::ObjectOf;
using storage::SegmentFile;

namespace {

// The ids of the segment files in `dir`, in ascending order.
Result<std::vector<uint32_t>> ListSegmentFiles(const std::string& dir) {
  std::vector<uint32_t> ids;
  std::error_code ec;
  for (const auto& de : std::filesystem::directory_iterator(dir, ec)) {
    uint32_t id = 0;
    if (storage::ParseSegmentFileName(de.path().filename().string(), &id)) {
      ids.push_back(id);
    }
  }
  if (ec) {
    return Status(ErrorCode::FILE_READ_FAIL,
                  "cannot list " + dir + ": " + ec.message());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

Status FileStorage::Recover() {
  auto ids = ListSegmentFiles(config_.ssd_dir);
  if (!ids.ok()) return ids.status();

  // Versions of a key that lost to a newer one (left by a crash between
  // writing a new version and invalidating the old one).
  NamedRecords losers;
  uint64_t max_seq = 0;
  std::unordered_set<const SegmentFile*> unreadable;
  for (uint32_t id : *ids) {
    const SegmentFile* damaged = nullptr;
    if (Status st = RecoverFile(id, &losers, &max_seq, &damaged); !st.ok()) {
      return st;
    }
    if (damaged != nullptr) unreadable.insert(damaged);
  }
  next_seq_.store(max_seq + 1);

  index_.ForEach([&](std::string_view, std::string_view, const IndexEntry& e) {
    e.file->live_bytes.fetch_add(e.span());
    bytes_live_.fetch_add(e.span());
  });
  const std::unordered_set<const SegmentFile*> deleted =
      DeleteEmptyFiles(unreadable);
  std::erase_if(losers, [&](const auto& l) {
    return deleted.count(l.second.file.get()) > 0;
  });
  Invalidate(losers);
  spdlog::info(
      "SSD tier at {}: {} file(s), {} record(s), {} of {} bytes used, {} "
      "damaged record(s) skipped, backend {}",
      config_.ssd_dir, files_.size(), index_.size(), bytes_used_,
      config_.ssd_capacity_bytes, corrupt_skipped_.load(), io_->name());
  return Status::OK();
}

Status FileStorage::RecoverFile(uint32_t id, NamedRecords* losers,
                                uint64_t* max_seq,
                                const SegmentFile** unreadable) {
  uint64_t size = 0;
  auto opened = SegmentFile::OpenExisting(config_.ssd_dir, id, &size);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<SegmentFile> f = std::move(opened).value();
  f->used_bytes = size;
  f->sealed = true;
  bytes_used_ += size;
  files_[id] = f;
  next_file_id_ = std::max(next_file_id_, id + 1);

  storage::ScanCounts counts;
  Status st = storage::ScanSegment(
      io_, *f, size, config_.ssd_verify_on_open,
      [&](const storage::ScannedRecord& r) {
        IndexEntry e{f,     r.offset,        r.value_len,
                     r.seq, r.data_checksum, r.object_version};
        auto out = index_.Upsert(r.tenant, r.key, e);
        if (out.superseded) {
          losers->push_back(
              {ObjectOf(r.tenant, r.key, *out.superseded), *out.superseded});
        }
      },
      &counts);
  if (!st.ok()) {
    // The rest of this file is unreadable; what was found stays usable,
    // and the file is kept (it may hold records past the bad spot).
    *unreadable = f.get();
    read_errors_.fetch_add(1);
    spdlog::warn("SSD tier: {}", st.message());
  }
  if (counts.corrupt > 0) {
    spdlog::warn("SSD tier: skipped {} damaged record(s) in {}", counts.corrupt,
                 f->path());
  }
  corrupt_skipped_.fetch_add(counts.corrupt);
  *max_seq = std::max(*max_seq, counts.max_seq);
  return Status::OK();
}

std::unordered_set<const SegmentFile*> FileStorage::DeleteEmptyFiles(
    const std::unordered_set<const SegmentFile*>& keep) {
  // Files without a live record are only garbage now.
  std::unordered_set<const SegmentFile*> deleted;
  for (auto it = files_.begin(); it != files_.end();) {
    SegmentFile& f = *it->second;
    if (f.live_bytes.load() != 0 || keep.count(&f) > 0) {
      ++it;
      continue;
    }
    ::unlink(f.path().c_str());
    bytes_used_ -= f.used_bytes;
    deleted.insert(&f);
    it = files_.erase(it);
  }
  return deleted;
}

}  // namespace kvpool
