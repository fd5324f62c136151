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

#include <libunwind.h>

#include <atomic>
#include <cstdarg>
#include <cstring>

#include "platform/checked_read.h"

#include "platform/raw_syscall.h"
#include "platform/sampling/unwind_table_copy.h"
#include "platform/tsan_sync.h"

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
// ScopedEverySignalBlocked's depth, and the mask calls it saved (libunwind_imports.h).
__thread int t_every_signal_blocked __attribute__((tls_model("initial-exec"))) = 0;
__thread uint64_t t_skipped_mask_calls __attribute__((tls_model("initial-exec"))) = 0;
__thread uint64_t t_made_mask_calls __attribute__((tls_model("initial-exec"))) = 0;

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
// The raw one: libc's syscall() is interposable (the program's, or the preload tier's own).
int ReplacementMsync(void* address, size_t length, int flags) {
  const long result =
      RawSyscall(SYS_msync, reinterpret_cast<long>(address), static_cast<long>(length), flags);
  if (result < 0) {
    errno = static_cast<int>(-result);
    return -1;
  }
  return 0;
}

// The rest of libunwind's imports that a walk can reach and a program can interpose (a
// tracer's or a sanitizer's own mmap): its memory pools grow with mmap, its validation asks
// mincore. Raw system calls, libc's semantics (MAP_FAILED or -1 and errno on failure).
void* ReplacementMmap(void* address, size_t length, int protection, int flags, int descriptor,
                      off_t offset) {
  const long result = RawSyscall(SYS_mmap, reinterpret_cast<long>(address),
                                 static_cast<long>(length), protection, flags, descriptor,
                                 static_cast<long>(offset));
  if (result < 0 && result > -4096) {
    errno = static_cast<int>(-result);
    return MAP_FAILED;
  }
  return reinterpret_cast<void*>(result);
}

int ReplacementMunmap(void* address, size_t length) {
  const long result =
      RawSyscall(SYS_munmap, reinterpret_cast<long>(address), static_cast<long>(length));
  if (result < 0) {
    errno = static_cast<int>(-result);
    return -1;
  }
  return 0;
}

int ReplacementMincore(void* address, size_t length, unsigned char* vector) {
  const long result = RawSyscall(SYS_mincore, reinterpret_cast<long>(address),
                                 static_cast<long>(length), reinterpret_cast<long>(vector));
  if (result < 0) {
    errno = static_cast<int>(-result);
    return -1;
  }
  return 0;
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
// (nor the signal interposer's, which forwarded libunwind's calls unchanged anyway). None
// when every signal is blocked already (ScopedEverySignalBlocked): the block changes
// nothing, and the restore of the "every signal" it reported saved changes nothing either.
int ReplacementSigprocmask(int how, const sigset_t* set, sigset_t* old) {
  if (t_every_signal_blocked > 0) {
    if (old != nullptr) memset(old, 0xff, sizeof(*old));
    ++t_skipped_mask_calls;
    return 0;
  }
  ++t_made_mask_calls;
  const long result = RawSyscall(SYS_rt_sigprocmask, how, reinterpret_cast<long>(set),
                                 reinterpret_cast<long>(old), _NSIG / 8);
  if (result < 0) {
    errno = static_cast<int>(-result);
    return -1;
  }
  return 0;
}

struct Redirection {
  char name[24];  // An array: a pointer would cost a dynamic relocation (the library's size).
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
    {"mmap", reinterpret_cast<void*>(&ReplacementMmap)},
    {"mmap64", reinterpret_cast<void*>(&ReplacementMmap)},
    {"munmap", reinterpret_cast<void*>(&ReplacementMunmap)},
    {"mincore", reinterpret_cast<void*>(&ReplacementMincore)},
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

ScopedEverySignalBlocked::ScopedEverySignalBlocked(bool blocked) {
  if (!blocked) return;
  declared_ = true;
  ++t_every_signal_blocked;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

ScopedEverySignalBlocked::~ScopedEverySignalBlocked() {
  if (!declared_) return;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  --t_every_signal_blocked;
}

bool EverySignalBlockedOnThisThread() {
  uint64_t mask = 0;
  if (RawSyscall(SYS_rt_sigprocmask, SIG_BLOCK, 0, reinterpret_cast<long>(&mask),
                 sizeof(mask)) != 0) {
    return false;
  }
  // Every signal but the two the kernel never blocks (SIGKILL, SIGSTOP).
  const uint64_t unblockable = (uint64_t{1} << (SIGKILL - 1)) | (uint64_t{1} << (SIGSTOP - 1));
  return (mask | unblockable) == ~uint64_t{0};
}

LibunwindMaskCalls LibunwindMaskCallsOfThisThread() {
  return {t_made_mask_calls, t_skipped_mask_calls};
}

// --- The dynamic loader's list during walks (declared in libunwind_walker.h). -------------

namespace {
__thread uintptr_t t_lookup_pc __attribute__((tls_model("initial-exec"))) = 0;

uint64_t g_unreadable_lookups = 0;  // Relaxed atomic increments.

// The copies handed to libunwind's callback (unwind_table_copy.h): a pool, one slot per
// thread that is inside a libunwind step's lookup (libunwind reads the copy after the
// callback returns, while it parses the FDE, until the step ends: the slot is kept until the
// thread's next SetLibunwindLookupPc()). 16 slots (70 KiB of .bss, touched only when used):
// a 17th thread looking up at the same instant (each lookup takes ~10 us) is refused, its
// walk ends there, counted with the unreadable ones.
constexpr int kCopySlots = 16;
UnwindTableCopy g_copies[kCopySlots];
std::atomic<bool> g_copy_busy[kCopySlots];
__thread int t_copy_slot __attribute__((tls_model("initial-exec"))) = -1;
__thread uint64_t t_refused_lookups __attribute__((tls_model("initial-exec"))) = 0;

UnwindTableCopy* ClaimCopySlot() {
  if (t_copy_slot >= 0) return &g_copies[t_copy_slot];
  for (int i = 0; i < kCopySlots; ++i) {
    bool expected = false;
    if (g_copy_busy[i].compare_exchange_strong(expected, true, std::memory_order_acquire)) {
      // Also when this walk runs inside a TSan blocking call (a wait wrapper's end, in a
      // program linked with TSan): platform/tsan_sync.h.
      StrataTsanAcquire(&g_copy_busy[i]);
      t_copy_slot = i;
      return &g_copies[i];
    }
  }
  return nullptr;
}

// Copies whose CFA program holds an expression (UnwindTableCopy::has_expression), one per
// FDE, kept for good: libunwind's cache keeps pointers to an expression's bytes (the PLT's
// CFA rule, for one), read at later steps and by other threads' walks, so such a copy must
// never be reused for another FDE. Objects have a handful of such FDEs (the linker's one for
// .plt); past kPermanentCopies the lookup is refused (the walk ends at that frame, as for an
// unreadable table).
// Written once: the thread that claims an entry (its key the FDE's address + 1: being built;
// FDEs are 4-byte aligned) builds it, then stores the FDE's address (release); others use it
// as it is once so (acquire), and refuse the lookup while it is being built. Rebuilding it at
// every lookup (the design before) wrote its bytes while other threads read them
// (InFunctionWithExpressionRule; found by TSan in takeover_repeat_linked_test,
// docs/reliability.md "Sanitizers", fifth round), and a reader could see the key before the
// range was written.
constexpr int kPermanentCopies = 64;
UnwindTableCopy g_permanent_copies[kPermanentCopies];
std::atomic<uintptr_t> g_permanent_fdes[kPermanentCopies];

}  // namespace

bool InFunctionWithExpressionRule(uintptr_t pc) {
  for (int i = 0; i < kPermanentCopies; ++i) {
    const uintptr_t key = g_permanent_fdes[i].load(std::memory_order_acquire);
    if (key == 0) break;     // Claimed in order.
    if (key & 1) continue;   // Being built.
    StrataTsanAcquire(&g_permanent_fdes[i]);
    const UnwindTableCopy& copy = g_permanent_copies[i];
    if (pc >= copy.pc_begin && pc < copy.pc_end) return true;
  }
  return false;
}

uint64_t RefusedLookupsOfThisThread() { return t_refused_lookups; }

namespace {

void ReleaseCopySlot() {
  if (t_copy_slot < 0) return;
  StrataTsanRelease(&g_copy_busy[t_copy_slot]);
  g_copy_busy[t_copy_slot].store(false, std::memory_order_release);
  t_copy_slot = -1;
}

}  // namespace

namespace {
// Lookup pcs with no unwind entry (ForgetLookupsWithoutEntry), direct-mapped by pc.
constexpr size_t kNoEntrySlots = 512;
std::atomic<uintptr_t> g_no_entry_pcs[kNoEntrySlots];
std::atomic<uintptr_t>& NoEntrySlot(uintptr_t pc) {
  return g_no_entry_pcs[(pc ^ (pc >> 9)) % kNoEntrySlots];
}
}  // namespace

void ForgetLookupsWithoutEntry() {
  for (std::atomic<uintptr_t>& slot : g_no_entry_pcs) slot.store(0, std::memory_order_relaxed);
}

void SetLibunwindLookupPc(uintptr_t pc) {
  ReleaseCopySlot();  // The previous step (if any) is over.
  t_lookup_pc = pc;
  MarkStrataLibunwindWalk(pc != 0);
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

// Not instrumented (called through the dl_iterate_phdr wrapper while sanitizers initialise).
__attribute__((no_sanitize("address", "undefined", "thread"))) bool ServeDlIteratePhdrDuringWalk(
    int (*callback)(dl_phdr_info*, size_t, void*), void* data, int* result) {
  const uintptr_t pc = t_lookup_pc;
  if (pc == 0) return false;
  *result = 0;
  if (NoEntrySlot(pc).load(std::memory_order_relaxed) == pc) return true;  // Seen: none.
  dl_find_object found;
  if (_dl_find_object(reinterpret_cast<void*>(pc), &found) != 0 || !found.dlfo_link_map) {
    return true;
  }
  // libunwind's callback and FDE parser read a checked copy of what they need, never the
  // object itself (the program may make it unreadable at any moment: issue 33;
  // unwind_table_copy.h). When it cannot be made, no object is reported: libunwind finds no
  // unwind information, the walk ends there.
  UnwindTableCopy* copy = ClaimCopySlot();
  dl_phdr_info info;
  const UnwindCopyResult copied =
      copy ? BuildUnwindTableCopy(found, pc, copy, &info) : UnwindCopyResult::kUnsupported;
  // The nearest entry below pc may end before it (code without one: libunwind, given it,
  // would find nothing either).
  if (copied == UnwindCopyResult::kNoEntry ||
      (copied == UnwindCopyResult::kCopied && pc - copy->pc_begin >= copy->pc_end - copy->pc_begin)) {
    NoEntrySlot(pc).store(pc, std::memory_order_relaxed);
    return true;
  }
  if (copied != UnwindCopyResult::kCopied) {
    __atomic_fetch_add(&g_unreadable_lookups, 1, __ATOMIC_RELAXED);
    ++t_refused_lookups;
    return true;
  }
  if (copy->has_expression) {
    // Its permanent copy (above): built here if this lookup claims it, else used as built
    // (then only the program headers differ from `info`); refused while being built.
    const uintptr_t fde = copy->fde_address;
    int index = -1;
    bool claimed = false;
    for (int i = 0; i < kPermanentCopies && index < 0; ++i) {
      uintptr_t key = g_permanent_fdes[i].load(std::memory_order_acquire);
      claimed = key == 0 && g_permanent_fdes[i].compare_exchange_strong(
                                key, fde + 1, std::memory_order_acq_rel);
      if (claimed || key == fde) index = i;
    }
    if (index < 0 ||
        (claimed && BuildUnwindTableCopy(found, pc, &g_permanent_copies[index], &info) !=
                        UnwindCopyResult::kCopied)) {
      ++t_refused_lookups;  // A claimed entry left "being built": this FDE is refused.
      return true;
    }
    if (claimed) {
      StrataTsanRelease(&g_permanent_fdes[index]);
      g_permanent_fdes[index].store(fde, std::memory_order_release);
    } else {
      StrataTsanAcquire(&g_permanent_fdes[index]);
      info.dlpi_phdr = g_permanent_copies[index].headers;
    }
  }
  // Only the classic fields: libunwind's callback reads no further (dlpi_adds, TLS ...).
  *result = callback(&info, offsetof(dl_phdr_info, dlpi_adds), data);
  return true;
}

// --- libunwind's memory reads during Strata's walks (CheckLibunwindMemoryReads). ----------

namespace {

__thread uintptr_t t_walk_stack_low __attribute__((tls_model("initial-exec"))) = 0;
__thread uintptr_t t_walk_stack_high __attribute__((tls_model("initial-exec"))) = 0;
// The ucontext the walk's cursor reads its registers from (SetLibunwindWalkContext); 0: none.
__thread uintptr_t t_walk_context __attribute__((tls_model("initial-exec"))) = 0;
__thread uint64_t t_checked_reads __attribute__((tls_model("initial-exec"))) = 0;
__thread WalkReadLog* t_walk_read_log __attribute__((tls_model("initial-exec"))) = nullptr;

void LogRead(unw_word_t address, unw_word_t value) {
  WalkReadLog* const log = t_walk_read_log;
  if (log == nullptr || (address >= log->unlogged_low && address < log->unlogged_high)) return;
  if (log->count < log->capacity) {
    log->reads[log->count++] = {static_cast<uintptr_t>(address), static_cast<uintptr_t>(value)};
  } else {
    log->overflowed = true;
  }
}

using AccessMemFunction = int (*)(unw_addr_space_t, unw_word_t, unw_word_t*, int, void*);
std::atomic<AccessMemFunction> g_libunwind_access_mem{nullptr};

// Not instrumented: the stack words it reads directly are the walked thread's own, which
// the thread (interrupted) may have been writing (as libunwind's own reads of them).
__attribute__((no_sanitize("address", "thread"))) int CheckedAccessMem(
    unw_addr_space_t space, unw_word_t address, unw_word_t* value, int write, void* argument) {
  const AccessMemFunction original = g_libunwind_access_mem.load(std::memory_order_relaxed);
  if (write || !Walking()) return original(space, address, value, write, argument);
  const uintptr_t context = t_walk_context;
  if ((address >= t_walk_stack_low && address <= t_walk_stack_high - sizeof(unw_word_t) &&
       t_walk_stack_high >= sizeof(unw_word_t)) ||
      (context != 0 && address - context <= sizeof(ucontext_t) - sizeof(unw_word_t))) {
    *value = *reinterpret_cast<const unw_word_t*>(address);
    LogRead(address, *value);
    return 0;
  }
  ++t_checked_reads;
  if (!CheckedRead(reinterpret_cast<const void*>(address), value, sizeof(*value))) {
    if (t_walk_read_log != nullptr) t_walk_read_log->unreadable = true;
    return -UNW_EINVAL;
  }
  LogRead(address, *value);
  return 0;
}

}  // namespace

bool CheckLibunwindMemoryReads(void* handle, void* local_addr_space) {
  using GetAccessors = unw_accessors_t* (*)(unw_addr_space_t);
  const auto get_accessors =
      reinterpret_cast<GetAccessors>(dlsym(handle, "_Ux86_64_get_accessors"));
  if (get_accessors == nullptr || local_addr_space == nullptr) return false;
  unw_accessors_t* accessors = get_accessors(static_cast<unw_addr_space_t>(local_addr_space));
  if (accessors == nullptr || accessors->access_mem == nullptr) return false;
  if (accessors->access_mem == &CheckedAccessMem) return true;  // Loaded (and done) before.
  g_libunwind_access_mem.store(accessors->access_mem, std::memory_order_release);
  // One aligned pointer store; libunwind reads the slot at each access.
  __atomic_store_n(&accessors->access_mem, &CheckedAccessMem, __ATOMIC_RELEASE);
  return true;
}

void SetWalkReadLog(WalkReadLog* log) {
  t_walk_read_log = log;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

void SetLibunwindWalkStackBounds(uintptr_t low, uintptr_t high) {
  t_walk_stack_low = low;
  t_walk_stack_high = high;
}

void SetLibunwindWalkContext(const ucontext_t* context) {
  t_walk_context = reinterpret_cast<uintptr_t>(context);
}

uint64_t LibunwindCheckedReadsOfThisThread() { return t_checked_reads; }

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
