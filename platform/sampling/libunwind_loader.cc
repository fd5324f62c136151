#include "platform/sampling/libunwind_loader.h"

#include "platform/sampling/libunwind_imports.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>

#include "platform/checked_read.h"
#include "platform/tsan_sync.h"

namespace strata {
namespace {

// Set when LoadOnce refused to load because a loaded object was unreadable.
std::atomic<bool> g_refused_unreadable{false};

// Published once, with release order, after the table is complete.
std::atomic<const LibunwindFunctions*> g_loaded{nullptr};
static_assert(std::atomic<const LibunwindFunctions*>::is_always_lock_free,
              "LoadedLibunwind() must be a plain load to be async-signal-safe");

// Looks `name` up in `handle`; on failure consumes the dlerror() message.
void* Resolve(void* handle, const char* name) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) (void)dlerror();
  return symbol;
}

template <typename Function>
bool ResolveFunction(void* handle, const char* name, Function* function) {
  void* symbol = Resolve(handle, name);
  *function = reinterpret_cast<Function>(symbol);
  return symbol != nullptr;
}

// Whether the loader can read what a dlopen() makes it read of the objects already loaded:
// their names (the dynamic loader's own name points into the executable's program headers,
// PT_INTERP) and their program headers. A program may have made those pages unreadable
// (mprotect PROT_NONE on its own ELF header: signals_stack_test's unreadable_elf); a dlopen
// then faults inside the loader (strcmp in _dl_name_match_p), which would kill the program.
// Checked reads only (platform/checked_read.h).
bool LoadedObjectsReadable() {
  bool readable = true;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        bool& ok = *static_cast<bool*>(data);
        if (info->dlpi_phdr != nullptr && info->dlpi_phnum > 0) {
          ElfW(Phdr) first;
          if (!CheckedRead(info->dlpi_phdr, &first, sizeof(first))) ok = false;
        }
        if (info->dlpi_name != nullptr) {
          // The name, page by page up to its end (names are short: at most 4 KiB looked at).
          uintptr_t at = reinterpret_cast<uintptr_t>(info->dlpi_name);
          for (size_t looked = 0; ok && looked < 4096;) {
            char chunk[64];
            const size_t to_page_end = 4096 - (at & 4095);
            const size_t n = to_page_end < sizeof(chunk) ? to_page_end : sizeof(chunk);
            if (!CheckedRead(reinterpret_cast<const void*>(at), chunk, n)) {
              ok = false;
              break;
            }
            if (memchr(chunk, '\0', n) != nullptr) break;
            at += n;
            looked += n;
          }
        }
        return ok ? 0 : 1;
      },
      &readable);
  return readable;
}

const LibunwindFunctions* LoadOnce() {
  static LibunwindFunctions table;  // Written here only, before publication.
  if (!LoadedObjectsReadable()) {
    g_refused_unreadable.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  if (!libunwind_loader_internal::OpenPrivately(kLibunwindSoname, &table)) return nullptr;
  StrataTsanRelease(&g_loaded);
  g_loaded.store(&table, std::memory_order_release);
  return &table;
}

}  // namespace

const LibunwindFunctions* LoadLibunwind() {
  // A function-local static: one thread loads, concurrent callers wait for it, and a failed
  // attempt is not repeated.
  static const LibunwindFunctions* const loaded = LoadOnce();
  return loaded;
}

bool LibunwindRefusedForUnreadableObjects() {
  return g_refused_unreadable.load(std::memory_order_relaxed);
}

const LibunwindFunctions* LoadedLibunwind() {
  const LibunwindFunctions* loaded = g_loaded.load(std::memory_order_acquire);
  // Also read by wait wrappers run inside a TSan blocking interceptor (ipc_abuse_backlog_test:
  // CalledFromLibunwind reading the table from nanosleep's wrapper): platform/tsan_sync.h.
  StrataTsanAcquire(&g_loaded);
  return loaded;
}

namespace libunwind_loader_internal {

bool OpenPrivately(const char* soname, LibunwindFunctions* table) {
  void* handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    (void)dlerror();
    return false;
  }
  // Before any libunwind function runs (its first initialisation opens its validation pipe):
  // libunwind must never touch a descriptor of the program (libunwind_imports.h). If the
  // program had loaded libunwind itself, this is its object, redirected too (same header).
  if (!RedirectLibunwindImports(handle)) {
    dlclose(handle);
    (void)dlerror();
    return false;
  }
  LibunwindFunctions resolved;
  bool ok = ResolveFunction(handle, "_ULx86_64_init_local", &resolved.init_local);
  ok = ResolveFunction(handle, "_ULx86_64_init_local2", &resolved.init_local2) && ok;
  ok = ResolveFunction(handle, "_ULx86_64_step", &resolved.step) && ok;
  ok = ResolveFunction(handle, "_ULx86_64_get_reg", &resolved.get_reg) && ok;
  ok = ResolveFunction(handle, "_Ux86_64_getcontext", &resolved.getcontext) && ok;
  ok = ResolveFunction(handle, "_Ux86_64_flush_cache", &resolved.flush_cache) && ok;
  ok = ResolveFunction(handle, "unw_backtrace", &resolved.backtrace) && ok;
  resolved.local_addr_space =
      static_cast<unw_addr_space_t*>(Resolve(handle, "_ULx86_64_local_addr_space"));
  ok = resolved.local_addr_space != nullptr && ok;
  // libunwind's reads of memory during Strata's walks are checked (libunwind_imports.h).
  ok = ok && CheckLibunwindMemoryReads(handle, *resolved.local_addr_space);
  if (!ok) {
    dlclose(handle);
    (void)dlerror();
    return false;
  }
  // The handle stays open for the life of the process: the table points into the library.
  *table = resolved;
  return true;
}

}  // namespace libunwind_loader_internal
}  // namespace strata
