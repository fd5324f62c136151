// Unmodified test program (no Strata include or call): dlopens plugin A, spins in its a_work,
// dlcloses it, dlopens plugin B — which the loader places where A was — and spins in its
// b_work. If B does not land at A's address, B is closed and the round retried (up to 20
// times). Prints whether the addresses matched, and exits 0 (2 when a plugin cannot load).
//   replaced_library LIB_A LIB_B [iterations]
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*WorkFunction)(unsigned long);

// Loads `path`, returns its function `name` and the library's base address.
static void* Load(const char* path, const char* name, WorkFunction* work, void** base) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    fprintf(stderr, "replaced_library: %s\n", dlerror());
    exit(2);
  }
  *work = (WorkFunction)dlsym(handle, name);
  Dl_info info;
  if (!*work || !dladdr((void*)*work, &info)) exit(2);
  *base = info.dli_fbase;
  return handle;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const unsigned long iterations = argc > 3 ? strtoul(argv[3], NULL, 10) : 100000000UL;
  int same = 0;
  for (int round = 0; round < 20 && !same; ++round) {
    WorkFunction a_work, b_work;
    void *a_base, *b_base;
    void* a = Load(argv[1], "a_work", &a_work, &a_base);
    a_work(iterations);
    dlclose(a);
    void* b = Load(argv[2], "b_work", &b_work, &b_base);
    same = a_base == b_base;
    if (same) {
      b_work(iterations);  // B stays loaded: the exit-time profile is saved with it mapped.
    } else {
      dlclose(b);
    }
  }
  printf("replaced_library: B loaded where A was: %s\n", same ? "yes" : "no");
  return 0;
}
