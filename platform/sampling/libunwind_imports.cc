#include "platform/sampling/libunwind_imports.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstring>

#include "platform/raw_syscall.h"

namespace strata {
namespace {

// The two numbers the redirected pipe2() hands out: negative (the kernel never allocates a
// negative descriptor, and answers EBADF for one), and not -1, which libunwind reads as "no
// pipe".
constexpr int kValidationReadEnd = -(1 << 30);
constexpr int kValidationWriteEnd = -(1 << 30) - 1;

// Depth of Strata walks on this thread. Initial-exec: read in signal handlers, where a
// dynamic TLS access could allocate.
__thread int t_walk_depth __attribute__((tls_model("initial-exec"))) = 0;
__thread bool t_walk_marked __attribute__((tls_model("initial-exec"))) = false;

int g_redirected_slots = 0;
int g_validations = 0;  // Relaxed atomic increments (async-signal-safe, lock-free).

bool Walking() { return t_walk_depth > 0 || t_walk_marked; }

// --- Replacements. Async-signal-safe, no cancellation point on the redirected paths. ------

int ReplacementPipe2(int descriptors[2], int /*flags*/) {
  descriptors[0] = kValidationReadEnd;
  descriptors[1] = kValidationWriteEnd;
  errno = 0;
  return 0;
}

int ReplacementPipe(int descriptors[2]) { return ReplacementPipe2(descriptors, 0); }

ssize_t ReplacementRead(int descriptor, void* buffer, size_t count) {
  if (IsLibunwindValidationDescriptor(descriptor) || Walking()) {
    errno = EAGAIN;  // "The pipe is empty": libunwind keeps it and goes on.
    return -1;
  }
  return read(descriptor, buffer, count);
}

int ReplacementClose(int descriptor) {
  if (IsLibunwindValidationDescriptor(descriptor)) {
    errno = 0;
    return 0;
  }
  if (Walking()) {
    errno = EBADF;  // A walk never closes a descriptor: it may be the program's.
    return -1;
  }
  return close(descriptor);
}

// libunwind's validation write: success (1 byte "written") when `address` is readable.
ssize_t ValidationWrite(const void* address, size_t count) {
  __atomic_fetch_add(&g_validations, 1, __ATOMIC_RELAXED);
  if (count == 0) {
    errno = 0;
    return 0;
  }
  if (!libunwind_imports_internal::AddressIsReadable(reinterpret_cast<uintptr_t>(address),
                                                     count)) {
    errno = EFAULT;
    return -1;
  }
  errno = 0;
  return static_cast<ssize_t>(count);
}

ssize_t ReplacementWrite(int descriptor, const void* buffer, size_t count) {
  if (IsLibunwindValidationDescriptor(descriptor)) return ValidationWrite(buffer, count);
  if (Walking()) {
    errno = 0;  // Debug output of libunwind: dropped.
    return static_cast<ssize_t>(count);
  }
  return write(descriptor, buffer, count);
}

// syscall() is variadic; like glibc's own, this reads six argument words whatever the caller
// passed (the unused ones are garbage, and unused). An `int` argument (libunwind's descriptor,
// the constant 1) fills only the low half of its word: the upper half is unspecified
// (usually zero, so a negative descriptor does not come back sign-extended). Descriptors are
// therefore compared as int, and the validation checks one byte, as libunwind asks.
long ReplacementSyscall(long number, ...) {
  va_list arguments;
  va_start(arguments, number);
  long word[6];
  for (long& value : word) value = va_arg(arguments, long);
  va_end(arguments);
  if (static_cast<int>(number) == SYS_write &&
      (IsLibunwindValidationDescriptor(static_cast<int>(word[0])) || Walking())) {
    return ValidationWrite(reinterpret_cast<const void*>(word[1]), 1);
  }
  return syscall(number, word[0], word[1], word[2], word[3], word[4], word[5]);
}

int ReplacementOpen(const char* path, int flags, ...) {
  if (Walking()) {
    errno = EACCES;  // A walk opens no file.
    return -1;
  }
  mode_t mode = 0;
  if ((flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE) {
    va_list arguments;
    va_start(arguments, flags);
    mode = static_cast<mode_t>(va_arg(arguments, int));
    va_end(arguments);
  }
  return open(path, flags, mode);
}

// msync() is a cancellation point in glibc; libunwind calls it to check a mapping when
// mincore() did not work at its initialisation. The raw system call is not one.
int ReplacementMsync(void* address, size_t length, int flags) {
  const long result = syscall(SYS_msync, address, length, flags);
  if (result == 0) errno = 0;
  return static_cast<int>(result);
}

// dl_iterate_phdr: during a walk, answered for the object of the pc being unwound without
// the loader's list lock (ServeDlIteratePhdrDuringWalk); otherwise libc's (through the
// preload tier's wrapper where it is loaded). In a signal handler that interrupted its own
// thread inside dlopen(), the real one waits for a lock that very thread holds: glibc's
// recursive list lock is not re-entrant in the window between taking the lock word and
// storing its owner (seen: libunwind_walker_test hung there, in _dl_add_to_namespace_list).
int ReplacementDlIteratePhdr(int (*callback)(dl_phdr_info*, size_t, void*), void* data) {
  int result = 0;
  if (ServeDlIteratePhdrDuringWalk(callback, data, &result)) return result;
  return dl_iterate_phdr(callback, data);
}

// libunwind's lock (around every step's cache look-up, and at its set-up): glibc's own mutex
// functions, looked up in libc.so.6 itself (RedirectLibunwindImports), never the program's
// definition of pthread_mutex_lock (a lock-profiling shim, a locked allocator's) nor Strata's
// wait wrapper, which the global scope would give: libunwind's lock is libunwind's own, taken
// in the sampling handler and at each thread's registration, before the program's start
// routine. Left as they are when libc's cannot be found.
using MutexFunction = int (*)(pthread_mutex_t*);
std::atomic<MutexFunction> g_libc_mutex_lock{nullptr};
std::atomic<MutexFunction> g_libc_mutex_unlock{nullptr};

int ReplacementMutexLock(pthread_mutex_t* mutex) {
  return g_libc_mutex_lock.load(std::memory_order_relaxed)(mutex);
}

int ReplacementMutexUnlock(pthread_mutex_t* mutex) {
  return g_libc_mutex_unlock.load(std::memory_order_relaxed)(mutex);
}

void FindLibcMutexFunctions() {
  if (g_libc_mutex_lock.load() != nullptr && g_libc_mutex_unlock.load() != nullptr) return;
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  if (libc == nullptr) {
    (void)dlerror();
    return;
  }
  void* lock = dlsym(libc, "pthread_mutex_lock");
  void* unlock = dlsym(libc, "pthread_mutex_unlock");
  if (lock != nullptr && unlock != nullptr) {
    g_libc_mutex_lock.store(reinterpret_cast<MutexFunction>(lock));
    g_libc_mutex_unlock.store(reinterpret_cast<MutexFunction>(unlock));
  }
  dlclose(libc);  // Only a reference count: libc stays.
}

// libunwind blocks every signal around its lock (sigfillset's set: glibc's internal signals
// left out) and restores the mask after: the raw system call, never a program's sigprocmask
// (nor the signal interposer's, which forwarded libunwind's calls unchanged anyway).
int ReplacementSigprocmask(int how, const sigset_t* set, sigset_t* old) {
  const long result = RawSyscall(SYS_rt_sigprocmask, how, reinterpret_cast<long>(set),
                                 reinterpret_cast<long>(old), _NSIG / 8);
  if (result < 0) {
    errno = static_cast<int>(-result);
    return -1;
  }
  return 0;
}

struct Redirection {
  const char* name;
  void* replacement;
};

const Redirection kRedirections[] = {
    {"pipe2", reinterpret_cast<void*>(&ReplacementPipe2)},
    {"pipe", reinterpret_cast<void*>(&ReplacementPipe)},
    {"read", reinterpret_cast<void*>(&ReplacementRead)},
    {"close", reinterpret_cast<void*>(&ReplacementClose)},
    {"syscall", reinterpret_cast<void*>(&ReplacementSyscall)},
    {"write", reinterpret_cast<void*>(&ReplacementWrite)},
    {"open", reinterpret_cast<void*>(&ReplacementOpen)},
    {"open64", reinterpret_cast<void*>(&ReplacementOpen)},
    {"msync", reinterpret_cast<void*>(&ReplacementMsync)},
    {"dl_iterate_phdr", reinterpret_cast<void*>(&ReplacementDlIteratePhdr)},
    {"pthread_mutex_lock", reinterpret_cast<void*>(&ReplacementMutexLock)},
    {"pthread_mutex_unlock", reinterpret_cast<void*>(&ReplacementMutexUnlock)},
    {"sigprocmask", reinterpret_cast<void*>(&ReplacementSigprocmask)},
};

void* ReplacementFor(const char* name) {
  if (g_libc_mutex_lock.load(std::memory_order_relaxed) == nullptr &&
      std::strncmp(name, "pthread_mutex_", 14) == 0) {
    return nullptr;  // libc's were not found: left to the global scope.
  }
  for (const Redirection& redirection : kRedirections) {
    if (std::strcmp(name, redirection.name) == 0) return redirection.replacement;
  }
  return nullptr;
}

// --- Readability checks. -------------------------------------------------------------------

// rt_sigprocmask with an invalid `how` copies the 8-byte set from user memory first (EFAULT
// when it cannot) and only then rejects `how` (EINVAL), changing nothing: a readability
// check of the aligned 8 bytes around `probe` (never crossing a page) in ~0.15 us. Checked at
// start-up on a known readable and a known unreadable page (CheckSigprocmaskProbe()).
bool ReadableBySigprocmask(uintptr_t probe) {
  constexpr int kInvalidHow = -1;
  const uintptr_t aligned = probe & ~uintptr_t{7};
  // Raw: neither libc's syscall() nor the preload tier's interposer of it (errno untouched).
  return RawSyscall(SYS_rt_sigprocmask, kInvalidHow, static_cast<long>(aligned), 0, 8) ==
         -EINVAL;
}
// process_vm_readv of one byte from this very process into a local byte: ~1.2 us (it pins
// the page). The fallback when the sigprocmask probe does not behave as expected. Refused
// (seccomp: ENOSYS, EPERM): unreadable.
bool ReadableByProcessVmReadv(uintptr_t probe) {
  char byte;
  iovec local = {&byte, 1};
  iovec remote = {reinterpret_cast<void*>(probe), 1};
  return RawSyscall(SYS_process_vm_readv, RawSyscall(SYS_getpid), reinterpret_cast<long>(&local),
                    1, reinterpret_cast<long>(&remote), 1, 0) == 1;
}
// Which check AddressIsReadable() uses; decided once by RedirectLibunwindImports().
std::atomic<bool> g_use_sigprocmask_probe{false};

bool ProbeIsReadable(uintptr_t probe) {
  return g_use_sigprocmask_probe.load(std::memory_order_relaxed) ? ReadableBySigprocmask(probe)
                                                                 : ReadableByProcessVmReadv(probe);
}

// True when the sigprocmask probe tells a readable page from a PROT_NONE one here (a kernel
// or a seccomp filter could answer otherwise; then process_vm_readv is used).
bool CheckSigprocmaskProbe() {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  void* unreadable = mmap(nullptr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (unreadable == MAP_FAILED) return false;
  const int saved_errno = errno;
  uint64_t readable = 0;
  const bool works = ReadableBySigprocmask(reinterpret_cast<uintptr_t>(&readable)) &&
                     !ReadableBySigprocmask(reinterpret_cast<uintptr_t>(unreadable)) &&
                     !ReadableBySigprocmask(reinterpret_cast<uintptr_t>(unreadable) + page - 1);
  munmap(unreadable, page);
  errno = saved_errno;
  return works;
}

// --- The object's layout. ------------------------------------------------------------------

// What the dynamic section tells about the relocations and symbols.
struct DynamicInfo {
  const ElfW(Sym)* symbols = nullptr;
  const char* strings = nullptr;
  size_t strings_size = 0;
  const ElfW(Rela)* plt_relocations = nullptr;
  size_t plt_relocations_size = 0;
  const ElfW(Rela)* relocations = nullptr;
  size_t relocations_size = 0;
  bool plt_is_rela = true;
  bool has_rel = false;  // REL-type relocations: not expected on x86-64, refused.
};

// glibc has already added the load address to the address-valued entries of a writable
// dynamic section (x86-64); an unadjusted entry is an offset below the load address.
uintptr_t DynamicAddress(uintptr_t value, uintptr_t load_address) {
  return value >= load_address ? value : load_address + value;
}

DynamicInfo ReadDynamicSection(const link_map* map) {
  DynamicInfo info;
  const uintptr_t base = map->l_addr;
  for (const ElfW(Dyn)* entry = map->l_ld; entry->d_tag != DT_NULL; ++entry) {
    const uintptr_t value = entry->d_un.d_val;
    switch (entry->d_tag) {
      case DT_SYMTAB:
        info.symbols = reinterpret_cast<const ElfW(Sym)*>(DynamicAddress(value, base));
        break;
      case DT_STRTAB:
        info.strings = reinterpret_cast<const char*>(DynamicAddress(value, base));
        break;
      case DT_STRSZ:
        info.strings_size = value;
        break;
      case DT_JMPREL:
        info.plt_relocations = reinterpret_cast<const ElfW(Rela)*>(DynamicAddress(value, base));
        break;
      case DT_PLTRELSZ:
        info.plt_relocations_size = value;
        break;
      case DT_PLTREL:
        info.plt_is_rela = value == DT_RELA;
        break;
      case DT_RELA:
        info.relocations = reinterpret_cast<const ElfW(Rela)*>(DynamicAddress(value, base));
        break;
      case DT_RELASZ:
        info.relocations_size = value;
        break;
      case DT_REL:
        info.has_rel = true;
        break;
      default:
        break;
    }
  }
  return info;
}

// Where the object's writable data is, and which part of it the loader made read-only after
// relocation (PT_GNU_RELRO, page-rounded down at both ends as glibc does).
struct WritableLayout {
  uintptr_t relro_start = 0;
  uintptr_t relro_end = 0;
  struct Range {
    uintptr_t start;
    uintptr_t end;
  };
  Range writable[8] = {};
  int writable_count = 0;

  bool InWritableSegment(uintptr_t address) const {
    for (int i = 0; i < writable_count; ++i) {
      if (address >= writable[i].start && address + sizeof(void*) <= writable[i].end) return true;
    }
    return false;
  }
  bool InRelro(uintptr_t address) const {
    return address >= relro_start && address < relro_end;
  }
};

bool ReadWritableLayout(const link_map* map, WritableLayout* layout) {
  dl_find_object found;
  if (_dl_find_object(const_cast<ElfW(Dyn)*>(map->l_ld), &found) != 0) return false;
  const auto* header = static_cast<const ElfW(Ehdr)*>(found.dlfo_map_start);
  if (std::memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 ||
      header->e_phentsize != sizeof(ElfW(Phdr))) {
    return false;
  }
  const auto* headers = reinterpret_cast<const ElfW(Phdr)*>(
      static_cast<const char*>(found.dlfo_map_start) + header->e_phoff);
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (int i = 0; i < header->e_phnum; ++i) {
    const ElfW(Phdr)& segment = headers[i];
    const uintptr_t start = map->l_addr + segment.p_vaddr;
    if (segment.p_type == PT_LOAD && (segment.p_flags & PF_W) != 0 &&
        layout->writable_count < 8) {
      layout->writable[layout->writable_count++] = {start, start + segment.p_memsz};
    } else if (segment.p_type == PT_GNU_RELRO) {
      layout->relro_start = start & ~(page - 1);
      layout->relro_end = (start + segment.p_memsz) & ~(page - 1);
    }
  }
  return true;
}

// Stores `value` into the GOT slot at `address`, making a RELRO page writable for the store.
bool StoreSlot(const WritableLayout& layout, uintptr_t address, void* value) {
  if (!layout.InWritableSegment(address)) return false;
  void** slot = reinterpret_cast<void**>(address);
  if (__atomic_load_n(slot, __ATOMIC_RELAXED) == value) return true;
  if (!layout.InRelro(address)) {
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    return true;
  }
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  void* page_start = reinterpret_cast<void*>(address & ~(page - 1));
  if (mprotect(page_start, page, PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot, value, __ATOMIC_RELEASE);
  return mprotect(page_start, page, PROT_READ) == 0;
}

// Redirects the matching slots of one relocation table; false if one could not be written.
bool RedirectTable(const link_map* map, const DynamicInfo& info, const WritableLayout& layout,
                   const ElfW(Rela)* table, size_t table_size, int* redirected) {
  if (table == nullptr) return true;
  const size_t count = table_size / sizeof(ElfW(Rela));
  for (size_t i = 0; i < count; ++i) {
    const ElfW(Rela)& relocation = table[i];
    const auto type = ELF64_R_TYPE(relocation.r_info);
    if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
    const ElfW(Sym)& symbol = info.symbols[ELF64_R_SYM(relocation.r_info)];
    if (symbol.st_shndx != SHN_UNDEF || symbol.st_name >= info.strings_size) continue;
    void* replacement = ReplacementFor(info.strings + symbol.st_name);
    if (replacement == nullptr) continue;
    if (!StoreSlot(layout, map->l_addr + relocation.r_offset, replacement)) return false;
    ++*redirected;
  }
  return true;
}

}  // namespace

bool RedirectLibunwindImports(void* handle) {
  link_map* map = nullptr;
  if (handle == nullptr || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr) {
    (void)dlerror();
    return false;
  }
  const DynamicInfo info = ReadDynamicSection(map);
  if (info.symbols == nullptr || info.strings == nullptr || info.has_rel || !info.plt_is_rela) {
    return false;
  }
  WritableLayout layout;
  if (!ReadWritableLayout(map, &layout)) return false;
  static const bool sigprocmask_probe_works = CheckSigprocmaskProbe();
  g_use_sigprocmask_probe.store(sigprocmask_probe_works, std::memory_order_relaxed);
  FindLibcMutexFunctions();
  int redirected = 0;
  const bool ok = RedirectTable(map, info, layout, info.plt_relocations,
                                info.plt_relocations_size, &redirected) &&
                  RedirectTable(map, info, layout, info.relocations, info.relocations_size,
                                &redirected);
  g_redirected_slots = redirected;
  return ok;
}

ScopedStrataLibunwindWalk::ScopedStrataLibunwindWalk() {
  ++t_walk_depth;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

ScopedStrataLibunwindWalk::~ScopedStrataLibunwindWalk() {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  --t_walk_depth;
}

void MarkStrataLibunwindWalk(bool walking) {
  t_walk_marked = walking;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

bool InStrataLibunwindWalk() { return Walking(); }

// --- The dynamic loader's list during walks (declared in libunwind_walker.h). -------------

namespace {
__thread uintptr_t t_lookup_pc __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace

void SetLibunwindLookupPc(uintptr_t pc) {
  t_lookup_pc = pc;
  MarkStrataLibunwindWalk(pc != 0);
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

uint64_t g_unreadable_lookups = 0;  // Relaxed atomic increments.

// Checks readability 4 KiB at a time (one probe per page whatever the page size), skipping
// the page it found readable last (consecutive reads mostly stay on one page).
class PageChecker {
 public:
  bool Readable(uintptr_t address, size_t length) {
    if (length == 0) return true;
    if (address + length < address) return false;
    for (uintptr_t page = address & ~uintptr_t{4095}; page <= address + length - 1;
         page += 4096) {
      if (page == last_readable_) continue;
      if (!ProbeIsReadable(page)) return false;
      last_readable_ = page;
    }
    return true;
  }

 private:
  uintptr_t last_readable_ = 1;  // Never a page address.
};

// A .eh_frame entry (FDE or CIE) at `entry`: its length word and its whole body readable?
// Sets *body to the address after the length word(s) (the CIE pointer of an FDE).
bool EntryIsReadable(PageChecker& checker, uintptr_t entry, uintptr_t* body) {
  if (!checker.Readable(entry, 4)) return false;
  uint32_t length32;
  std::memcpy(&length32, reinterpret_cast<const void*>(entry), 4);
  uint64_t length = length32;
  *body = entry + 4;
  if (length32 == 0xffffffffu) {
    if (!checker.Readable(entry + 4, 8)) return false;
    std::memcpy(&length, reinterpret_cast<const void*>(entry + 4), 8);
    *body = entry + 12;
  }
  // An FDE or CIE is small (tens of bytes); a huge length is damage, not something to probe.
  if (length < 4 || length > (1u << 20)) return false;
  return checker.Readable(*body, static_cast<size_t>(length));
}

// True when every byte that ServeDlIteratePhdrDuringWalk() and libunwind's callback read to
// look up `pc` in `found` is readable: the ELF header and program headers, the dynamic
// section (libunwind reads DT_PLTGOT), the .eh_frame_hdr header, the table entries of the
// binary search for `pc` (the same search as libunwind's lookup()), and the FDE and CIE it
// ends at. With another .eh_frame_hdr encoding (libunwind then searches linearly), the whole
// PT_GNU_EH_FRAME segment. Probes with system calls only (AddressIsReadable): never faults,
// takes no lock. ~10 probes per lookup, ~0.15 us each; lookups happen on libunwind's cache
// misses only. Not covered: a page made unreadable by another thread between this check and
// libunwind's read, and a CIE's indirect personality pointer (libunwind reads that word).
bool UnwindInfoIsReadable(const dl_find_object& found, uintptr_t pc) {
  PageChecker checker;
  const uintptr_t start = reinterpret_cast<uintptr_t>(found.dlfo_map_start);
  if (!checker.Readable(start, sizeof(ElfW(Ehdr)))) return false;
  const auto* header = reinterpret_cast<const ElfW(Ehdr)*>(start);
  if (header->e_phentsize != sizeof(ElfW(Phdr))) return true;  // Not served (below).
  const uintptr_t headers = start + header->e_phoff;
  if (!checker.Readable(headers, header->e_phnum * sizeof(ElfW(Phdr)))) return false;
  const uintptr_t load = found.dlfo_link_map->l_addr;
  const auto* segments = reinterpret_cast<const ElfW(Phdr)*>(headers);
  const ElfW(Phdr)* eh_frame_hdr = nullptr;
  for (int i = 0; i < header->e_phnum; ++i) {
    if (segments[i].p_type == PT_DYNAMIC &&
        !checker.Readable(load + segments[i].p_vaddr, segments[i].p_memsz)) {
      return false;
    }
    if (segments[i].p_type == PT_GNU_EH_FRAME) eh_frame_hdr = &segments[i];
  }
  if (eh_frame_hdr == nullptr) return true;  // libunwind reads no table (it opens no file).
  const uintptr_t hdr = load + eh_frame_hdr->p_vaddr;
  // version, eh_frame_ptr_enc, fde_count_enc, table_enc, then (standard encodings) a 4-byte
  // eh_frame_ptr, a 4-byte fde_count and the table of {start, fde} 4-byte pairs.
  constexpr size_t kStandardHeader = 12;
  if (!checker.Readable(hdr, 4)) return false;
  const auto* bytes = reinterpret_cast<const uint8_t*>(hdr);
  constexpr uint8_t kPcrelSdata4 = 0x1b, kUdata4 = 0x03, kDatarelSdata4 = 0x3b;
  if (bytes[0] != 1 || bytes[1] != kPcrelSdata4 || bytes[2] != kUdata4 ||
      bytes[3] != kDatarelSdata4) {
    return checker.Readable(hdr, eh_frame_hdr->p_memsz);
  }
  if (!checker.Readable(hdr, kStandardHeader)) return false;
  uint32_t count;
  std::memcpy(&count, bytes + 8, 4);
  struct Entry {
    int32_t start;
    int32_t fde;
  };
  const uintptr_t table = hdr + kStandardHeader;
  const int32_t relative_pc = static_cast<int32_t>(pc - hdr);
  size_t low = 0;
  size_t high = count;
  while (low < high) {
    const size_t middle = (low + high) / 2;
    const uintptr_t at = table + middle * sizeof(Entry);
    if (!checker.Readable(at, sizeof(Entry))) return false;
    Entry entry;
    std::memcpy(&entry, reinterpret_cast<const void*>(at), sizeof(entry));
    if (relative_pc < entry.start) {
      high = middle;
    } else {
      low = middle + 1;
    }
  }
  if (high == 0) return true;  // No FDE for the pc: libunwind reads nothing more.
  Entry entry;
  std::memcpy(&entry, reinterpret_cast<const void*>(table + (high - 1) * sizeof(Entry)),
              sizeof(entry));
  const uintptr_t fde = hdr + static_cast<intptr_t>(entry.fde);
  uintptr_t fde_body = 0;
  if (!EntryIsReadable(checker, fde, &fde_body)) return false;
  uint32_t cie_offset;
  std::memcpy(&cie_offset, reinterpret_cast<const void*>(fde_body), 4);
  uintptr_t cie_body = 0;
  return EntryIsReadable(checker, fde_body - cie_offset, &cie_body);
}

// Not instrumented (called through the dl_iterate_phdr wrapper while sanitizers initialise).
__attribute__((no_sanitize("address", "undefined", "thread"))) bool ServeDlIteratePhdrDuringWalk(
    int (*callback)(dl_phdr_info*, size_t, void*), void* data, int* result) {
  const uintptr_t pc = t_lookup_pc;
  if (pc == 0) return false;
  *result = 0;
  dl_find_object found;
  if (_dl_find_object(reinterpret_cast<void*>(pc), &found) != 0 || !found.dlfo_link_map) {
    return true;
  }
  // Every byte of the object that this function and libunwind's callback will read is
  // checked first (the program may have made it unreadable: issue 33). When one is not, the
  // object is not reported: libunwind finds no unwind information, the walk ends there.
  if (!UnwindInfoIsReadable(found, pc)) {
    __atomic_fetch_add(&g_unreadable_lookups, 1, __ATOMIC_RELAXED);
    return true;
  }
  // The program headers, from the ELF header at the start of the object's mapping (the first
  // PT_LOAD segment maps file offset 0 in every object the loader maps).
  const auto* header = static_cast<const ElfW(Ehdr)*>(found.dlfo_map_start);
  if (header->e_ident[EI_MAG0] != ELFMAG0 || header->e_ident[EI_MAG1] != ELFMAG1 ||
      header->e_ident[EI_MAG2] != ELFMAG2 || header->e_ident[EI_MAG3] != ELFMAG3 ||
      header->e_phentsize != sizeof(ElfW(Phdr))) {
    return true;
  }
  dl_phdr_info info = {};
  info.dlpi_addr = found.dlfo_link_map->l_addr;
  info.dlpi_name = found.dlfo_link_map->l_name;
  info.dlpi_phdr = reinterpret_cast<const ElfW(Phdr)*>(
      static_cast<const char*>(found.dlfo_map_start) + header->e_phoff);
  info.dlpi_phnum = header->e_phnum;
  // Only the classic fields: libunwind's callback reads no further (dlpi_adds, TLS ...).
  *result = callback(&info, offsetof(dl_phdr_info, dlpi_adds), data);
  return true;
}

uint64_t UnwindLookupsRefusedAsUnreadable() {
  return __atomic_load_n(&g_unreadable_lookups, __ATOMIC_RELAXED);
}

bool IsLibunwindValidationDescriptor(long number) {
  return number == kValidationReadEnd || number == kValidationWriteEnd;
}

namespace libunwind_imports_internal {

bool AddressIsReadable(uintptr_t address, size_t length) {
  if (length == 0) return true;
  // The first and the last byte: libunwind asks about one byte, or one word within a page.
  const uintptr_t probes[2] = {address, address + length - 1};
  for (uintptr_t probe : probes) {
    if (!ProbeIsReadable(probe)) {
      errno = EFAULT;
      return false;
    }
  }
  return true;
}

int RedirectedSlotCount() { return g_redirected_slots; }

bool UsesSigprocmaskProbe() { return g_use_sigprocmask_probe.load(std::memory_order_relaxed); }

void UseSigprocmaskProbeForTesting(bool use) {
  g_use_sigprocmask_probe.store(use, std::memory_order_relaxed);
}

int ValidationCount() { return __atomic_load_n(&g_validations, __ATOMIC_RELAXED); }

}  // namespace libunwind_imports_internal
}  // namespace strata
