// Internal to MooncakeStore's implementation files (compat_store*.cc): the
// return codes every call uses.
#ifndef KVPOOL_CAPI_COMPAT_STORE_INTERNAL_H_
#define KVPOOL_CAPI_COMPAT_STORE_INTERNAL_H_

#include "kvpool/status.h"

namespace kvpool::compat::store_internal {

constexpr int kInvalid = static_cast<int>(ErrorCode::INVALID_PARAMS);

inline int Code(const Status& s) { return static_cast<int>(s.code()); }

}  // namespace kvpool::compat::store_internal

#endif  // KVPOOL_CAPI_COMPAT_STORE_INTERNAL_H_
