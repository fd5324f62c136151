// NeverDestroyed<T>: a T that lives in the object's own storage and is never destroyed.
//
// For the process-wide singletons of code that runs inside someone else's program:
//   T& Thing() { static NeverDestroyed<T> thing; return thing.get(); }
// Unlike `static T* t = new T;` it takes nothing from the program's allocator (the object is
// in static storage), and unlike `static T t;` it registers no exit-time destructor, so the
// object stays usable from other exit handlers and from threads still running at exit.
//
// Thread safety: as any function-local static (C++ guarantees one construction). get() is
// async-signal-safe once constructed.
#ifndef STRATA_PLATFORM_NEVER_DESTROYED_H_
#define STRATA_PLATFORM_NEVER_DESTROYED_H_

#include <new>
#include <utility>

namespace strata {

template <typename T>
class NeverDestroyed {
 public:
  template <typename... Args>
  explicit NeverDestroyed(Args&&... args) {
    new (storage_) T(std::forward<Args>(args)...);
  }
  NeverDestroyed(const NeverDestroyed&) = delete;
  NeverDestroyed& operator=(const NeverDestroyed&) = delete;

  T& get() { return *std::launder(reinterpret_cast<T*>(storage_)); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace strata

#endif  // STRATA_PLATFORM_NEVER_DESTROYED_H_
