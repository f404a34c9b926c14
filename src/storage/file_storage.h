// FileStorage: the SSD tier of one node. Values live in append-only segment
// files of 4096-aligned records (docs/ssd_format.md), read and written with
// O_DIRECT through io_uring (or pread/pwrite where io_uring is refused), and
// found through an in-memory index rebuilt by scanning the files at Open.
//
// Space is reclaimed in two steps because the master must forget a
// LOCAL_DISK replica before its bytes go away: PickEvictionCandidates names
// the oldest records, the caller tells the master and calls Remove for each,
// and CollectGarbage (or its background thread) later rewrites the live
// records of mostly-dead files and deletes those files.
//
// Every method is thread-safe.
#ifndef KVPOOL_STORAGE_FILE_STORAGE_H_
#define KVPOOL_STORAGE_FILE_STORAGE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kvpool/status.h"
#include "storage/io_backend.h"
#include "storage/storage_index.h"
#include "storage/verify_pool.h"

namespace kvpool {

enum class SsdIoBackend {
  kAuto,     // io_uring, or pread/pwrite (logged once) where it is refused
  kIoUring,  // io_uring or fail
  kPread,    // pread/pwrite with O_DIRECT
};

struct FileStorageConfig {
  std::string ssd_dir;                        // created if missing
  uint64_t segment_file_size = 256ull << 20;  // a log file is sealed here
  uint64_t ssd_capacity_bytes =
      4ull << 30;  // bytes of segment files (NodeConfig's default)
  double ssd_high_watermark_ratio = 0.90;  // eviction starts above
  double ssd_low_watermark_ratio = 0.80;   // ... and stops below
  // A sealed file is collected when this share of it is dead.
  double ssd_gc_dead_ratio = 0.5;
  // Period of the background collector; 0 = none (call CollectGarbage).
  int64_t ssd_gc_interval_ms = 0;
  SsdIoBackend ssd_io_backend = SsdIoBackend::kAuto;
  unsigned ssd_io_queue_depth = 64;  // requests in flight per ring
  unsigned ssd_io_rings = 4;         // concurrent batches before waiting
  // Threads that verify the checksums of a multi-value batch read while its
  // later values are still arriving (0 = the reading thread hashes alone).
  unsigned ssd_verify_threads = 1;
  // Check every value's checksum during the start-up scan (reads every
  // byte); when false only headers are checked and damage in a value is
  // found by the read that meets it.
  bool ssd_verify_on_open = true;
  // Replaces the backend chosen above; for fault injection in tests.
  std::shared_ptr<storage::IoBackend> io_backend_override;

  Status Validate() const;
};

struct WriteItem {
  std::string tenant;
  std::string key;
  const void* data = nullptr;
  uint64_t size = 0;
  // Chosen by the master for this value and stored with it, so that after a
  // restart the master can tell a stale copy from the current one.
  uint64_t object_version = 0;
};

struct ReadItem {
  std::string tenant;
  std::string key;
  void* dest = nullptr;  // 4096-aligned dest is filled without a copy
  uint64_t capacity = 0;
  // Set, when not null, to the value's XXH3-64 (storage::DataChecksum) once
  // the bytes in dest were verified against it: a caller that keeps the
  // bytes needs not hash them again.
  uint64_t* checksum_out = nullptr;
  uint64_t* version_out = nullptr;  // likewise, the record's object version
};

struct StoredObject {
  std::string tenant;
  std::string key;
  uint64_t size = 0;
  uint64_t seq = 0;             // write order; smaller is older
  uint64_t object_version = 0;  // as written; 0 for records of format v1
};

struct FileStorageStats {
  uint64_t capacity_bytes = 0;
  uint64_t bytes_used = 0;  // segment file bytes handed out, dead included
  uint64_t bytes_live = 0;  // on-disk bytes of current records
  uint64_t files = 0;
  uint64_t records = 0;
  uint64_t corrupt_skipped = 0;  // damaged records skipped by the Open scan
  uint64_t corrupt_reads = 0;    // reads that failed a checksum
  uint64_t values_read = 0;      // values read from the disk and verified
  uint64_t read_errors = 0;
  uint64_t write_errors = 0;
  uint64_t gc_runs = 0;
  uint64_t gc_files_deleted = 0;
  uint64_t gc_records_moved = 0;
  uint64_t gc_bytes_reclaimed = 0;
  bool io_uring_enabled = false;
  // The filesystem refused a write for lack of space (or was full at
  // Open): writes fail fast with NO_AVAILABLE_HANDLE until it has room.
  bool disk_full = false;
  uint64_t disk_full_events = 0;
};

class FileStorage {
 public:
  // Creates the directory, locks it (UNAVAILABLE_IN_CURRENT_STATUS if
  // another FileStorage holds it), checks that it takes O_DIRECT, scans the
  // existing segment files and rebuilds the index. Damaged records are
  // skipped and counted (corrupt_skipped); new writes go to a new file.
  static Result<std::unique_ptr<FileStorage>> Open(
      const FileStorageConfig& config);
  ~FileStorage();
  FileStorage(const FileStorage&) = delete;
  FileStorage& operator=(const FileStorage&) = delete;

  // Writes all items in one submission; one Status per item. Rewriting a key
  // supersedes its record; rewriting it with the same bytes and the same
  // object version does nothing (same bytes under a new object version are
  // written as a new record, so a crash leaves the old or the new version).
  // INVALID_PARAMS: empty key, tenant + key over storage::kMaxTenantPlusKey
  // bytes, null data.
  // NO_AVAILABLE_HANDLE: over ssd_capacity_bytes, or the filesystem is full
  // (after a write met ENOSPC, each later write first asks the filesystem
  // for room, so a full disk costs no doomed I/O). FILE_WRITE_FAIL: the
  // disk refused the write (full, I/O error, short write); the key then
  // keeps its previous value, if any.
  std::vector<Status> BatchWrite(const std::vector<WriteItem>& items);

  // Reads all items in one submission; each result is the value's size.
  // The checksum is verified on every read: damage is OBJECT_NOT_FOUND (and
  // the key is dropped), never wrong bytes. BUFFER_OVERFLOW: capacity is
  // smaller than the value. Only [dest, dest + size) is written, and its
  // contents are unspecified when the result is an error.
  // `arrived` (optional) is called with an item's index, on the calling
  // thread and while later reads may still be in flight, as soon as all of
  // its bytes have come from the disk, before they are verified: a caller
  // that budgets bytes at the disk can give that item's share back there.
  // Not called for an item whose read failed or that needed no read; an
  // item read again (its record moved meanwhile) may be reported twice.
  using ArrivedFn = std::function<void(size_t item)>;
  std::vector<Result<uint64_t>> BatchRead(const std::vector<ReadItem>& items,
                                          const ArrivedFn& arrived = {});

  Result<uint64_t> LookupSize(std::string_view tenant,
                              std::string_view key) const;
  // The object version the key was written with (OBJECT_NOT_FOUND if absent).
  Result<uint64_t> LookupVersion(std::string_view tenant,
                                 std::string_view key) const;

  // Drops the key and marks its record dead on disk (so a restart does not
  // bring it back). Its space returns through garbage collection.
  Status Remove(std::string_view tenant, std::string_view key);
  // Remove, but only if the key holds `object_version`: the master can drop
  // a stale replica without racing a newer write of the key. Otherwise
  // OBJECT_NOT_FOUND, and the record is left alone.
  Status RemoveIfVersion(std::string_view tenant, std::string_view key,
                         uint64_t object_version);

  // Every stored object, for re-registering with the master after a restart.
  std::vector<StoredObject> List() const;

  // Above the high watermark: the oldest records whose removal brings the
  // live bytes below the low watermark, oldest first. Removes nothing.
  std::vector<StoredObject> PickEvictionCandidates() const;

  // Rewrites the live records of sealed files whose dead share exceeds
  // ssd_gc_dead_ratio (and, above the high watermark, of the deadest files
  // until the low watermark is in reach) into the active file, then deletes
  // those files. Reads in flight on a deleted file finish normally.
  Status CollectGarbage();

  FileStorageStats GetStats() const;
  bool io_uring_enabled() const { return io_->is_io_uring(); }
  // The backend's reads so far (IoBackend::read_timing), for benches and
  // metrics that compare the tier's reads with fio's at the same depth.
  storage::IoReadTiming io_read_timing() const { return io_->read_timing(); }
  const FileStorageConfig& config() const { return config_; }

 private:
  struct PendingRecord;  // file_storage_internal.h
  struct ValueRead;      // file_storage_read.cc
  // Records by name and index entry (what a dead header needs).
  using NamedRecord = std::pair<StoredObject, storage::IndexEntry>;
  using NamedRecords = std::vector<NamedRecord>;

  explicit FileStorage(const FileStorageConfig& config);
  // The filesystem ran out of space (ENOSPC, or full at Open).
  void MarkDiskFull();
  void DropLive(const storage::IndexEntry& e);
  // The rest of a remove once `e` left the index: live bytes, dead header.
  Status MarkRemoved(std::string_view tenant, std::string_view key,
                     const storage::IndexEntry& e);

  // Start-up (file_storage_recovery.cc).
  Status Recover();
  // Adds segment file `id` to the file table and its records to the index;
  // versions of a key that lost to a newer one go to *losers. Sets
  // *unreadable to the file when its scan stopped at an unreadable spot.
  Status RecoverFile(uint32_t id, NamedRecords* losers, uint64_t* max_seq,
                     const storage::SegmentFile** unreadable);
  // Deletes the files without a live record, except those in `keep`;
  // returns the ones deleted.
  std::unordered_set<const storage::SegmentFile*> DeleteEmptyFiles(
      const std::unordered_set<const storage::SegmentFile*>& keep);

  // Write path (file_storage_write.cc).
  // With files_mu_ held: the file to append a record of `span` bytes to.
  Result<std::shared_ptr<storage::SegmentFile>> ActiveFileFor(uint64_t span);
  // With files_mu_ held: while the disk is marked full, whether the
  // filesystem has room for `span` bytes now (then the mark is cleared).
  Status CheckDiskRoomLocked(uint64_t span);
  void Reserve(std::span<PendingRecord> recs, bool over_capacity_ok);
  void ReleaseReservation(storage::SegmentFile* file);
  void WriteRecords(std::span<PendingRecord> recs);
  // Makes the written records of `recs` current in the index and releases
  // every reservation; returns the records they superseded.
  NamedRecords PublishWrites(std::span<PendingRecord> recs);
  // Overwrites the headers of records that stopped being current with dead
  // headers; returns how many could not be written.
  size_t Invalidate(const NamedRecords& records);

  // Read path (file_storage_read.cc): BatchRead's steps.
  enum class ReadOutcome { kSettled, kMoved };
  // The values of items[todo] that can be read; the others' results are
  // set in *out.
  std::vector<ValueRead> PlanReads(const std::vector<ReadItem>& items,
                                   const std::vector<size_t>& todo,
                                   std::vector<Result<uint64_t>>* out);
  // Reads every value and hashes it while later pieces are in flight.
  void ReadAndHash(std::vector<ValueRead>& reads, const ArrivedFn& arrived);
  // Sets *out from a finished read; kMoved when the key was rewritten
  // meanwhile and must be looked up again.
  ReadOutcome SettleRead(const ReadItem& it, ValueRead& r,
                         Result<uint64_t>* out);
  ReadOutcome SettleDamagedRead(const ReadItem& it,
                                const storage::IndexEntry& e,
                                const std::string& damage,
                                Result<uint64_t>* out);

  // Garbage collection (file_storage_gc.cc).
  // The sealed files without appends in flight whose dead share is at
  // least ssd_gc_dead_ratio and, above the high watermark, the deadest
  // others until the low watermark is in reach.
  std::vector<std::shared_ptr<storage::SegmentFile>> ChooseFilesToCollect();
  Status CollectFile(const std::shared_ptr<storage::SegmentFile>& file,
                     NamedRecords live);
  // Moves one chunk of `file`'s live records to the active file.
  Status MoveRecords(storage::SegmentFile& file,
                     std::span<const NamedRecord> chunk);
  // Makes the moved copies `recs` of chunk[from[j]] current where the key
  // still holds the old record, releases every reservation, and marks dead
  // the copies that lost; returns the first write error.
  Status PublishMoves(storage::SegmentFile& file,
                      std::span<const NamedRecord> chunk,
                      std::span<PendingRecord> recs,
                      const std::vector<size_t>& from);
  // Unlinks a file that collection left without live records and takes it
  // out of the file table.
  Status DeleteCollectedFile(storage::SegmentFile& file);
  void GcLoop();

  const FileStorageConfig config_;
  std::unique_ptr<storage::IoBackend> owned_io_;
  std::unique_ptr<storage::VerifyPool> verify_pool_;
  storage::IoBackend* io_ = nullptr;
  storage::StorageIndex index_;
  std::atomic<uint64_t> next_seq_{1};

  // The file table. Lock order: files_mu_ before an index shard is never
  // needed; the two are not held together.
  mutable std::mutex files_mu_;
  std::map<uint32_t, std::shared_ptr<storage::SegmentFile>> files_;
  std::shared_ptr<storage::SegmentFile> active_;
  uint32_t next_file_id_ = 1;
  uint64_t bytes_used_ = 0;
  bool disk_full_ = false;  // guarded by files_mu_
  std::atomic<uint64_t> disk_full_events_{0};

  std::atomic<uint64_t> bytes_live_{0};
  std::atomic<uint64_t> corrupt_skipped_{0};
  std::atomic<uint64_t> corrupt_reads_{0};
  std::atomic<uint64_t> values_read_{0};
  std::atomic<uint64_t> read_errors_{0};
  std::atomic<uint64_t> write_errors_{0};
  std::atomic<uint64_t> gc_runs_{0};
  std::atomic<uint64_t> gc_files_deleted_{0};
  std::atomic<uint64_t> gc_records_moved_{0};
  std::atomic<uint64_t> gc_bytes_reclaimed_{0};

  int lock_fd_ = -1;  // flock on <ssd_dir>/LOCK: one store per directory

  std::mutex gc_mu_;  // one collection at a time
  std::mutex gc_thread_mu_;
  std::condition_variable gc_cv_;
  bool stopping_ = false;
  std::thread gc_thread_;
};

}  // namespace kvpool

#endif  // KVPOOL_STORAGE_FILE_STORAGE_H_
