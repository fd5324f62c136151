// A program built against label ABI 1's labels.h (commit 4197966): its inline AutoLabel read
// the thread's stack from the TLS variable below and pushed 32-byte records onto it when
// non-null. Against today's libstrata_base.so it must load (the symbol resolves) and see
// null on every thread, so that it never writes records of the old size. Prints what the
// program observed; exit status 0 when every thread saw null, 1 otherwise.
#include <pthread.h>

#include <cstdio>

#include "tests/host_safety/signals/burn.h"

namespace strata {
class ProfilingStack;
}  // namespace strata

// Label ABI 1's declaration, verbatim.
extern __thread strata::ProfilingStack* strata_t_profiling_stack
    __attribute__((tls_model("initial-exec")));

namespace {

bool SeesNoStack() {
  BurnCpu(0.05);  // Sampled meanwhile in a session.
  return strata_t_profiling_stack == nullptr;
}

void* OnThread(void* result) {
  *static_cast<bool*>(result) = SeesNoStack();
  return nullptr;
}

}  // namespace

int main() {
  bool thread_saw_null = false;
  pthread_t thread;
  if (pthread_create(&thread, nullptr, &OnThread, &thread_saw_null) != 0) return 2;
  const bool main_saw_null = SeesNoStack();
  pthread_join(thread, nullptr);
  std::printf("old label ABI: main %s, thread %s\n", main_saw_null ? "null" : "SET",
              thread_saw_null ? "null" : "SET");
  return main_saw_null && thread_saw_null ? 0 : 1;
}
