// A stand-in for libstrata_base.so whose attach entry point faults (attach_test.sh, "a fault
// in the call"): it exports what `strata record -p` looks up in the library it loads, and
// strata_attach_start writes through a null pointer. strata must report the fault (where, in
// which library) and give the borrowed thread back to its own call as it was.
#include <stdint.h>

__attribute__((visibility("default"))) int32_t strata_attach_state;
__attribute__((visibility("default"))) int32_t strata_attach_stop_request;
__attribute__((visibility("default"))) int32_t strata_attach_new_threads[64];

__attribute__((visibility("default"), noinline)) int strata_attach_start(const char* settings) {
  volatile int* nowhere = (volatile int*)(uintptr_t)(settings == 0 ? 0 : 0);
  *nowhere = 1;
  return 0;
}
