// A registered thread's name (ThreadInfo::name) in Strata's own memory, never the program's.
//
// Why: the registry keeps, destroys and moves thread names on the program's threads (a new
// thread's registration, a thread's end that prunes ended threads' entries). A std::string
// longer than its in-place buffer (15 characters) lives in the program's heap and is freed
// through the program's operator delete there (issue 33; docs/host-contract.md). A name of up
// to kInlineCapacity - 1 bytes is kept in the object itself; a longer one (given by the
// program with ProfilerRegisterThread("...")) in Strata's own pages (AllocateSizedPages: one
// mapping each, unmapped when the name is replaced or destroyed). When the kernel refuses the
// pages, the name is cut to what fits in place.
//
// Thread safety: a value type; not synchronised (the registry's mutex guards the registry's
// copies). Async-signal safety: none needed; it calls no libc function (raw system calls
// only, through page_allocation.h).
#ifndef STRATA_BASE_INTERNAL_THREAD_NAME_H_
#define STRATA_BASE_INTERNAL_THREAD_NAME_H_

#include <cstddef>
#include <cstring>
#include <string_view>

#include "platform/page_allocation.h"

namespace strata {
namespace base_internal {

class ThreadName {
 public:
  static constexpr size_t kInlineCapacity = 64;  // Including the terminating NUL.

  ThreadName() = default;
  explicit ThreadName(std::string_view name) { Assign(name); }
  ThreadName(const ThreadName& other) { Assign(other.view()); }
  ThreadName(ThreadName&& other) noexcept { Take(other); }
  ThreadName& operator=(const ThreadName& other) {
    if (this != &other) Assign(other.view());
    return *this;
  }
  ThreadName& operator=(ThreadName&& other) noexcept {
    if (this != &other) {
      Release();
      Take(other);
    }
    return *this;
  }
  ThreadName& operator=(std::string_view name) {
    Assign(name);
    return *this;
  }
  ThreadName& operator=(const char* name) { return *this = std::string_view(name ? name : ""); }
  ~ThreadName() { Release(); }

  const char* c_str() const { return outside_ ? outside_ : inline_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view view() const { return std::string_view(c_str(), size_); }
  operator std::string_view() const { return view(); }  // NOLINT: used as a string.

 private:
  void Assign(std::string_view name) {
    // `name` may point into this object's own storage: copy before releasing it.
    char* outside = nullptr;
    size_t size = name.size();
    if (size >= kInlineCapacity) {
      outside = static_cast<char*>(AllocateSizedPages(size + 1));
      if (!outside) size = kInlineCapacity - 1;
    }
    char* target = outside;
    char copy[kInlineCapacity];
    if (!target) target = copy;
    std::memmove(target, name.data(), size);
    target[size] = '\0';
    Release();
    if (outside) {
      outside_ = outside;
    } else {
      std::memcpy(inline_, copy, size + 1);
    }
    size_ = size;
  }
  void Take(ThreadName& other) {
    size_ = other.size_;
    outside_ = other.outside_;
    if (!outside_) std::memcpy(inline_, other.inline_, size_ + 1);
    other.outside_ = nullptr;
    other.size_ = 0;
    other.inline_[0] = '\0';
  }
  void Release() {
    if (outside_) FreeSizedPages(outside_);
    outside_ = nullptr;
    size_ = 0;
    inline_[0] = '\0';
  }

  char* outside_ = nullptr;  // Strata's pages when the name does not fit in place.
  size_t size_ = 0;
  char inline_[kInlineCapacity] = {};
};

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_THREAD_NAME_H_
