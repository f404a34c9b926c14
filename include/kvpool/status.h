// Error codes and Status, the one error type of kvpool's public API.
//
// ErrorCode's numeric values equal Mooncake Store's ErrorCode so that a
// compatible Python layer can return them unchanged.
#ifndef KVPOOL_STATUS_H_
#define KVPOOL_STATUS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace kvpool {

enum class ErrorCode : int32_t {
  OK = 0,
  INTERNAL_ERROR = -1,
  BUFFER_OVERFLOW = -10,
  SEGMENT_NOT_FOUND = -101,
  SEGMENT_ALREADY_EXISTS = -102,
  CLIENT_NOT_FOUND = -103,
  NO_AVAILABLE_HANDLE = -200,
  INVALID_VERSION = -300,
  INVALID_KEY = -400,
  WRITE_FAIL = -500,
  INVALID_PARAMS = -600,
  ILLEGAL_CLIENT = -601,
  INVALID_WRITE = -700,
  INVALID_READ = -701,
  INVALID_REPLICA = -702,
  REPLICA_IS_NOT_READY = -703,
  OBJECT_NOT_FOUND = -704,
  OBJECT_ALREADY_EXISTS = -705,
  OBJECT_HAS_LEASE = -706,
  LEASE_EXPIRED = -707,
  // kvpool's value (not taken from Mooncake): a MEMORY replica or an
  // in-flight promotion already exists; prefetch callers skip quietly.
  PROMOTION_ALREADY_EXISTS = -730,
  TRANSFER_FAIL = -800,
  RPC_FAIL = -900,
  UNAVAILABLE_IN_CURRENT_STATUS = -1010,
  FILE_NOT_FOUND = -1100,
  FILE_READ_FAIL = -1102,
  FILE_WRITE_FAIL = -1103,
  KEYS_ULTRA_LIMIT = -1203,
};

// Name of a code ("OBJECT_NOT_FOUND"); "UNKNOWN_ERROR" for values not listed.
const char* ErrorCodeName(ErrorCode code);
inline int32_t ToInt(ErrorCode c) { return static_cast<int32_t>(c); }
// Maps an integer from the wire back to a code; unknown values become
// INTERNAL_ERROR so a newer peer's code never turns into OK.
ErrorCode ErrorCodeFromInt(int32_t v);

// A code plus a human-readable message. Cheap to copy on success.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  explicit Status(ErrorCode code) : code_(code) {}
  static Status OK() { return Status(); }

  bool ok() const { return code_ == ErrorCode::OK; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return msg_; }
  // "OBJECT_NOT_FOUND (-704): message"
  std::string ToString() const;
  // Says, where a status is dropped on purpose (best-effort cleanup), that
  // it was not forgotten: Status is [[nodiscard]].
  void IgnoreError() const {}

 private:
  ErrorCode code_ = ErrorCode::OK;
  std::string msg_;
};

// A value or an error; the value is meaningful only when ok().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT
  Result(ErrorCode code) : status_(code) {}              // NOLINT
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  ErrorCode code() const { return status_.code(); }
  T& value() & { return value_; }
  const T& value() const& { return value_; }
  // By value, not T&&: `for (auto& x : F().value().items)` would otherwise
  // iterate a member of a temporary that is already gone (ASan found one).
  T value() && { return std::move(value_); }
  T* operator->() { return &value_; }
  const T* operator->() const { return &value_; }
  T& operator*() { return value_; }

 private:
  Status status_;
  T value_{};
};

}  // namespace kvpool

#endif  // KVPOOL_STATUS_H_
