#include "platform/sampling/stack_bounds.h"

#include <pthread.h>

namespace strata {

StackBounds StackBounds::OfCurrentThread() { return OfThread(pthread_self()); }

StackBounds StackBounds::OfThread(pthread_t thread) {
  pthread_attr_t attributes;
  if (pthread_getattr_np(thread, &attributes) != 0) return StackBounds();
  void* address = nullptr;
  size_t size = 0;
  const int error = pthread_attr_getstack(&attributes, &address, &size);
  pthread_attr_destroy(&attributes);
  if (error != 0 || address == nullptr || size == 0) return StackBounds();
  StackBounds bounds;
  bounds.low = reinterpret_cast<uintptr_t>(address);
  bounds.high = bounds.low + size;
  return bounds;
}

}  // namespace strata
