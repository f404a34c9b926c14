#include "kvpool/status.h"

namespace kvpool {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
#define KVPOOL_CASE(x) \
  case ErrorCode::x:   \
    return #x;
    KVPOOL_CASE(OK)
    KVPOOL_CASE(INTERNAL_ERROR)
    KVPOOL_CASE(BUFFER_OVERFLOW)
    KVPOOL_CASE(SEGMENT_NOT_FOUND)
    KVPOOL_CASE(SEGMENT_ALREADY_EXISTS)
    KVPOOL_CASE(CLIENT_NOT_FOUND)
    KVPOOL_CASE(NO_AVAILABLE_HANDLE)
    KVPOOL_CASE(INVALID_VERSION)
    KVPOOL_CASE(INVALID_KEY)
    KVPOOL_CASE(WRITE_FAIL)
    KVPOOL_CASE(INVALID_PARAMS)
    KVPOOL_CASE(ILLEGAL_CLIENT)
    KVPOOL_CASE(INVALID_WRITE)
    KVPOOL_CASE(INVALID_READ)
    KVPOOL_CASE(INVALID_REPLICA)
    KVPOOL_CASE(REPLICA_IS_NOT_READY)
    KVPOOL_CASE(OBJECT_NOT_FOUND)
    KVPOOL_CASE(OBJECT_ALREADY_EXISTS)
    KVPOOL_CASE(OBJECT_HAS_LEASE)
    KVPOOL_CASE(LEASE_EXPIRED)
    KVPOOL_CASE(PROMOTION_ALREADY_EXISTS)
    KVPOOL_CASE(TRANSFER_FAIL)
    KVPOOL_CASE(RPC_FAIL)
    KVPOOL_CASE(UNAVAILABLE_IN_CURRENT_STATUS)
    KVPOOL_CASE(FILE_NOT_FOUND)
    KVPOOL_CASE(FILE_READ_FAIL)
    KVPOOL_CASE(FILE_WRITE_FAIL)
    KVPOOL_CASE(KEYS_ULTRA_LIMIT)
#undef KVPOOL_CASE
  }
  return "UNKNOWN_ERROR";
}

ErrorCode ErrorCodeFromInt(int32_t v) {
  auto c = static_cast<ErrorCode>(v);
  if (std::string_view(ErrorCodeName(c)) == "UNKNOWN_ERROR") {
    return ErrorCode::INTERNAL_ERROR;
  }
  return c;
}

std::string Status::ToString() const {
  std::string s = ErrorCodeName(code_);
  s += " (" + std::to_string(ToInt(code_)) + ")";
  if (!msg_.empty()) s += ": " + msg_;
  return s;
}

}  // namespace kvpool
