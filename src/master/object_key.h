// The key of an object in the master's tables: a tenant id and the key's
// bytes, in 24 bytes instead of the 40 of a (uint32_t, std::string) pair,
// because the master holds one per object (docs/master_envelope.md).
#ifndef KVPOOL_MASTER_OBJECT_KEY_H_
#define KVPOOL_MASTER_OBJECT_KEY_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace kvpool {

// The bytes of a key, 20 bytes with 4-byte alignment so that ObjectKey
// (tenant id + these) is 24. A key of at most kInlineBytes bytes (a short
// test or bench key) lives inline; a longer one (an engine's 64-character
// hash) in a heap block of exactly its length, where std::string would
// allocate one byte more for its terminator. Converts to std::string_view;
// no terminator is kept, so data() is not a C string. Copyable (deep) and
// movable; not thread-safe, like std::string.
class KeyBytes {
 public:
  static constexpr size_t kInlineBytes = 16;

  KeyBytes() = default;
  KeyBytes(std::string_view s) { Assign(s); }  // NOLINT: as std::string
  KeyBytes(const std::string& s) : KeyBytes(std::string_view(s)) {}  // NOLINT
  KeyBytes(const char* s) : KeyBytes(std::string_view(s)) {}         // NOLINT
  KeyBytes(const KeyBytes& o) { Assign(o.view()); }
  KeyBytes(KeyBytes&& o) noexcept : size_(o.size_) {
    std::memcpy(bytes_, o.bytes_, sizeof(bytes_));
    o.size_ = 0;
  }
  KeyBytes& operator=(const KeyBytes& o) {
    if (this != &o) {
      KeyBytes copy(o);
      *this = std::move(copy);
    }
    return *this;
  }
  KeyBytes& operator=(KeyBytes&& o) noexcept {
    if (this != &o) {
      Free();
      size_ = std::exchange(o.size_, 0);
      std::memcpy(bytes_, o.bytes_, sizeof(bytes_));
    }
    return *this;
  }
  ~KeyBytes() { Free(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const char* data() const { return OnHeap() ? HeapPtr() : bytes_; }
  std::string_view view() const { return {data(), size_}; }
  operator std::string_view() const { return view(); }  // NOLINT
  bool operator==(const KeyBytes& o) const { return view() == o.view(); }

 private:
  bool OnHeap() const { return size_ > kInlineBytes; }
  // The heap block's address is kept in the first bytes of `bytes_`
  // (copied, since `bytes_` is only 4-byte aligned).
  char* HeapPtr() const {
    char* p;
    std::memcpy(&p, bytes_, sizeof(p));
    return p;
  }
  void Assign(std::string_view s) {
    // A key's length is checked (max_key_length) long before it gets here;
    // anything at 4 GiB or more is a bug.
    size_ = static_cast<uint32_t>(s.size());
    if (OnHeap()) {
      char* p = new char[s.size()];
      std::memcpy(p, s.data(), s.size());
      std::memcpy(bytes_, &p, sizeof(p));
    } else if (!s.empty()) {
      std::memcpy(bytes_, s.data(), s.size());
    }
  }
  void Free() {
    if (OnHeap()) delete[] HeapPtr();
    size_ = 0;
  }

  uint32_t size_ = 0;
  char bytes_[kInlineBytes] = {};
};
static_assert(sizeof(KeyBytes) == 20 && alignof(KeyBytes) == 4);

struct ObjectKey {
  uint32_t tenant = 0;
  KeyBytes key;
  bool operator==(const ObjectKey& o) const {
    return tenant == o.tenant && key == o.key;
  }
};
// With a 80-byte ObjectMeta, a table node is a 104-byte allocation (a
// 112-byte chunk of glibc's malloc).
static_assert(sizeof(ObjectKey) == 24);

// A borrowed key for lookups that must not copy the key string.
struct ObjectKeyView {
  uint32_t tenant = 0;
  std::string_view key;
};

struct ObjectKeyHash {
  using is_transparent = void;
  size_t operator()(const ObjectKey& k) const { return Hash(k.tenant, k.key); }
  size_t operator()(const ObjectKeyView& k) const {
    return Hash(k.tenant, k.key);
  }
  static size_t Hash(uint32_t tenant, std::string_view key) {
    return std::hash<std::string_view>()(key) ^
           (size_t{tenant} * 0x9E3779B97F4A7C15ull);
  }
};

struct ObjectKeyEq {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return a.tenant == b.tenant &&
           std::string_view(a.key) == std::string_view(b.key);
  }
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_OBJECT_KEY_H_
