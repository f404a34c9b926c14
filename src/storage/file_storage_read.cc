// FileStorage's read path, BatchRead in its named steps: plan the values
// (look each key up, check the caller's buffer), read them in pieces while
// hashing what has arrived, then settle each value (deliver it, drop a
// damaged record, or look a moved key up again). One of the files of the
// FileStorage class (file_storage.cc lists them).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "common/failpoint.h"
#include "storage/file_storage.h"
#include "storage/file_storage_internal.h"
#include "storage/record_format.h"

namespace kvpool {

using storage::AlignedBuffer;
using storage::AlignUp;
using storage::IndexEntry;
using storage::IoOp;
using storage::IoRequest;
using storage::kBlockSize;
using storage::RecordKind;

namespace {

// A read that meets a record invalidated under it looks the key up again.
constexpr int kReadAttempts = 3;
// How a batch of reads is cut into pieces (see ReadPieceSize); measured on
// virtio disks, where 256 KiB requests moved fewer bytes per second than
// whole 1-4 MiB values once several values were in flight.
constexpr uint64_t kMinReadPiece = 256ull << 10;
constexpr uint64_t kReadPiecesPerBatch = 8;

}  // namespace

// One value on its way in. Whole blocks of the value go straight into dest
// when dest is aligned, the rest into bounce. The value is read in pieces,
// and each piece is hashed as soon as it and those before it have arrived,
// so the checksum is computed while later pieces are in flight.
struct FileStorage::ValueRead {
  size_t item;
  IndexEntry entry;
  uint8_t* dest = nullptr;
  AlignedBuffer header;
  AlignedBuffer bounce;
  uint64_t direct = 0;  // bytes read straight into dest
  size_t first_req = 0;
  size_t pieces = 0;
  size_t hashed = 0;         // pieces hashed so far, in order
  size_t arrived_count = 0;  // pieces arrived
  std::vector<bool> arrived;
  std::unique_ptr<storage::DataHasher> hasher;
  std::string io_error;  // first failed request, if any

  // Appends the requests that read the record in `piece`-byte pieces (the
  // first with the header block) to *reqs, and this value's index `self`
  // to *owner for each.
  void AddRequests(uint64_t piece, uint32_t self, std::vector<IoRequest>* reqs,
                   std::vector<uint32_t>* owner) {
    const uint64_t len = entry.value_len;
    const uint64_t padded = AlignUp(len);
    header = AlignedBuffer(kBlockSize);
    direct = storage::IsAligned(dest) ? len & ~(kBlockSize - 1) : 0;
    if (padded > direct) bounce = AlignedBuffer(padded - direct);
    hasher = std::make_unique<storage::DataHasher>();
    pieces = (padded + piece - 1) / piece;
    arrived.assign(pieces, false);
    first_req = reqs->size();
    for (size_t k = 0; k < std::max<size_t>(pieces, 1); ++k) {
      const uint64_t a = k * piece, b = std::min(padded, a + piece);
      IoRequest q;
      q.op = IoOp::kRead;
      q.fd = entry.file->fd();
      q.offset = entry.offset + kBlockSize + a;
      if (k == 0) {
        q.offset = entry.offset;
        q.Add(header.data(), kBlockSize);
      }
      if (a < direct) q.Add(dest + a, std::min(b, direct) - a);
      if (b > direct) {
        const uint64_t from = std::max(a, direct);
        q.Add(bounce.data() + (from - direct), b - from);
      }
      reqs->push_back(q);
      owner->push_back(self);
    }
  }

  // Hashes [a, b) of the value, wherever its bytes landed.
  void HashRange(uint64_t a, uint64_t b) {
    if (a < direct) hasher->Update(dest + a, std::min(b, direct) - a);
    if (b > direct) {
      const uint64_t from = std::max(a, direct);
      hasher->Update(bounce.data() + (from - direct), b - from);
    }
  }

  // Hashes the pieces that have arrived in order since the last call.
  void HashArrivedPieces(uint64_t piece) {
    while (hashed < pieces && arrived[hashed]) {
      const uint64_t a = hashed * piece;
      HashRange(a, std::min(entry.value_len, a + piece));
      ++hashed;
    }
  }

  // Why the bytes read do not make the value the index names (empty when
  // they do): a dead or damaged header, one of another record, or a value
  // whose checksum does not match.
  std::string Damage(const ReadItem& it) const {
    auto parsed = storage::ParseHeaderBlock(header.data(), entry.file->id(),
                                            entry.offset);
    if (parsed.ok() && parsed->kind() == RecordKind::kDead) {
      return "record is dead";
    }
    if (!parsed.ok()) return parsed.status().message();
    if (parsed->tenant != it.tenant || parsed->key != it.key ||
        parsed->header.value_len != entry.value_len ||
        parsed->header.seq != entry.seq ||
        parsed->header.data_checksum != entry.data_checksum ||
        parsed->object_version != entry.object_version) {
      return "header does not match the index";
    }
    if (hashed != pieces || hasher->Digest() != entry.data_checksum) {
      return "value checksum";
    }
    return std::string();
  }
};

std::vector<Result<uint64_t>> FileStorage::BatchRead(
    const std::vector<ReadItem>& items, const ArrivedFn& arrived) {
  KVPOOL_FAILPOINT("storage.read");  // a slow disk, for fault tests
  std::vector<Result<uint64_t>> out(items.size(),
                                    Result<uint64_t>(ErrorCode::OK));
  std::vector<size_t> todo(items.size());
  std::iota(todo.begin(), todo.end(), size_t{0});
  for (int attempt = 0; attempt < kReadAttempts && !todo.empty(); ++attempt) {
    std::vector<ValueRead> reads = PlanReads(items, todo, &out);
    ReadAndHash(reads, arrived);
    std::vector<size_t> retry;
    for (ValueRead& r : reads) {
      if (SettleRead(items[r.item], r, &out[r.item]) == ReadOutcome::kMoved) {
        retry.push_back(r.item);
      }
    }
    todo = std::move(retry);
  }
  for (size_t i : todo) {
    out[i] = Status(
        ErrorCode::OBJECT_NOT_FOUND,
        items[i].tenant + "/" + items[i].key + " kept moving while being read");
  }
  return out;
}

std::vector<FileStorage::ValueRead> FileStorage::PlanReads(
    const std::vector<ReadItem>& items, const std::vector<size_t>& todo,
    std::vector<Result<uint64_t>>* out) {
  std::vector<ValueRead> reads;
  reads.reserve(todo.size());
  for (size_t i : todo) {
    const ReadItem& it = items[i];
    auto e = index_.Get(it.tenant, it.key);
    if (!e) {
      (*out)[i] = Status(ErrorCode::OBJECT_NOT_FOUND,
                         it.tenant + "/" + it.key + " is not on SSD");
      continue;
    }
    if (e->value_len > it.capacity) {
      (*out)[i] =
          Status(ErrorCode::BUFFER_OVERFLOW,
                 "value of " + std::to_string(e->value_len) +
                     " bytes, buffer of " + std::to_string(it.capacity));
      continue;
    }
    if (it.dest == nullptr && e->value_len > 0) {
      (*out)[i] = Status(ErrorCode::INVALID_PARAMS, "null dest");
      continue;
    }
    ValueRead& r = reads.emplace_back();
    r.item = i;
    r.entry = std::move(*e);
    r.dest = static_cast<uint8_t*>(it.dest);
  }
  return reads;
}

void FileStorage::ReadAndHash(std::vector<ValueRead>& reads,
                              const ArrivedFn& arrived) {
  // About kReadPiecesPerBatch pieces per batch: a lone large value is cut
  // so that its hashing overlaps its own I/O, while in a batch of many
  // values each value is one piece (hashing one overlaps the reading of
  // the others, and fewer, larger requests move more bytes per second).
  uint64_t batch_bytes = 0;
  for (const ValueRead& r : reads) batch_bytes += AlignUp(r.entry.value_len);
  const uint64_t piece = std::max<uint64_t>(
      kMinReadPiece, AlignUp(batch_bytes / kReadPiecesPerBatch + 1));

  std::vector<IoRequest> reqs;
  std::vector<uint32_t> owner;  // value of each request
  for (size_t j = 0; j < reads.size(); ++j) {
    reads[j].AddRequests(piece, uint32_t(j), &reqs, &owner);
  }
  // A lone value is hashed here piece by piece, overlapping its own I/O;
  // the values of a batch are handed whole to the verify pool as they
  // complete, so that another core hashes while this one reaps.
  const bool use_pool = reads.size() > 1 && verify_pool_->threads() > 0;
  storage::VerifyPool::Group verify(verify_pool_.get());
  io_->Submit(reqs, [&](size_t q) {
    ValueRead& r = reads[owner[q]];
    const uint64_t want = reqs[q].length();
    if (reqs[q].result != int64_t(want)) {
      if (r.io_error.empty())
        r.io_error = storage::IoError(reqs[q].result, want);
      return;
    }
    if (r.pieces == 0 || !r.io_error.empty()) return;
    r.arrived[q - r.first_req] = true;
    const bool all_arrived = ++r.arrived_count == r.pieces;
    if (all_arrived && arrived) arrived(r.item);
    if (!use_pool) {
      r.HashArrivedPieces(piece);
      return;
    }
    if (!all_arrived) return;
    verify.Run([&r] {
      r.HashRange(0, r.entry.value_len);
      r.hashed = r.pieces;
    });
  });
  verify.Wait();
}

FileStorage::ReadOutcome FileStorage::SettleRead(const ReadItem& it,
                                                 ValueRead& r,
                                                 Result<uint64_t>* out) {
  const IndexEntry& e = r.entry;
  if (!r.io_error.empty()) {
    read_errors_.fetch_add(1);
    *out = Status(ErrorCode::FILE_READ_FAIL,
                  "read of " + e.file->path() + " at " +
                      std::to_string(e.offset) + ": " + r.io_error);
    return ReadOutcome::kSettled;
  }
  if (std::string damage = r.Damage(it); !damage.empty()) {
    return SettleDamagedRead(it, e, damage, out);
  }
  if (e.value_len > r.direct) {
    std::memcpy(r.dest + r.direct, r.bounce.data(), e.value_len - r.direct);
  }
  *out = e.value_len;
  if (it.checksum_out != nullptr) *it.checksum_out = e.data_checksum;
  if (it.version_out != nullptr) *it.version_out = e.object_version;
  values_read_.fetch_add(1);
  return ReadOutcome::kSettled;
}

FileStorage::ReadOutcome FileStorage::SettleDamagedRead(
    const ReadItem& it, const IndexEntry& e, const std::string& damage,
    Result<uint64_t>* out) {
  // Removed or rewritten while this read was on its way (its header was
  // being marked dead): not damage, and the key may live elsewhere now.
  auto now = index_.Get(it.tenant, it.key);
  if (!now || !now->SameRecord(e)) {
    if (now) return ReadOutcome::kMoved;
    *out = Status(ErrorCode::OBJECT_NOT_FOUND,
                  it.tenant + "/" + it.key + " was removed");
    return ReadOutcome::kSettled;
  }
  if (index_.RemoveIf(it.tenant, it.key, e)) {
    DropLive(e);
    corrupt_reads_.fetch_add(1);
    spdlog::warn("SSD tier: {}/{} damaged in {} at {} ({}); dropped", it.tenant,
                 it.key, e.file->path(), e.offset, damage);
  }
  *out = Status(ErrorCode::OBJECT_NOT_FOUND, "checksum mismatch (" + damage +
                                                 ") for " + it.tenant + "/" +
                                                 it.key + "; dropped");
  return ReadOutcome::kSettled;
}

}  // namespace kvpool
