// Labels: developer-given frames ("pseudo-frames") pushed on a per-thread profiling stack
// while a scope runs; each sample merges them with the native frames by stack address, so a
// label shows up inside the function that pushed it. A push also records its push site (the
// address of an instruction at the push, after inlining), so that where the function that
// pushed it was inlined into another, `strata symbolicate` places the label under that
// inlined function and above the ones inlined into it (docs/symbols.md, "Labels").
//
//   void Parse(const Config& c) {
//     STRATA_LABEL("Parse config", kIo);                   // static string
//     STRATA_LABEL_DYNAMIC("Load", kIo, c.path.c_str());   // + a string copied per sample
//     ...
//   }
//
// Cost: inactive, one relaxed atomic load, and the dynamic string is not evaluated; active, a
// few stores and one `lea` for the push site (no lock, no allocation, no clock read; ~1.6 ns
// for push + pop, docs/benchmarks.md). Defining STRATA_PROFILER_DISABLED makes the macros
// compile to nothing.
//
// Contract: `label` must have static storage (a literal); a dynamic string must stay valid
// and unchanged for the scope (a sample copies up to 63 bytes of it). Labels are scoped:
// pop in reverse order (RAII does it). A sample keeps the outermost 32 labels of its thread;
// deeper ones (up to 256 are held on the stack) are in no sample.
//
// Thread safety: the profiling stack belongs to its thread; its own signal handler reads it
// (push/pop order stores with signal fences). Async-signal safety: push/pop are.
//
// ABI: the macros write LabelFrame records inline into the library's stack, so its layout is
// part of the binary interface. It changed in label ABI 2 (the push site was added); the
// thread-local stack pointer's symbol carries the version (strata_t_profiling_stack_v2), so
// a program built against an older header fails to load with a missing symbol instead of
// writing frames of the old size. Source compatible: the macros and AutoLabel are unchanged.
#ifndef STRATA_BASE_LABELS_H_
#define STRATA_BASE_LABELS_H_

#include <atomic>
#include <cstdint>

#include "base/categories.h"
#include "base/profiler.h"

namespace strata {

// The layout version of LabelFrame and ProfilingStack (see ABI above).
inline constexpr int kLabelAbiVersion = 2;

struct LabelFrame {
  const char* label;           // Static string.
  const char* dynamic_string;  // Optional, may be null.
  const void* stack_address;   // Address of the label object on the stack (for merging).
  // The address of an instruction at the push, in the code of the function whose scope holds
  // the label after inlining; null when unknown (the label then goes below every function
  // inlined into its frame).
  const void* push_site;
  uint32_t category;
};

class ProfilingStack {
 public:
  static constexpr uint32_t kCapacity = 256;

  void Push(const char* label, const char* dynamic_string, const void* stack_address,
            Category category, const void* push_site = nullptr) {
    const uint32_t depth = depth_.load(std::memory_order_relaxed);
    if (depth < kCapacity) {
      frames_[depth] = {label, dynamic_string, stack_address, push_site,
                        static_cast<uint32_t>(category)};
    }
    // The frame is complete before the depth that exposes it (to our own signal handler).
    std::atomic_signal_fence(std::memory_order_release);
    depth_.store(depth + 1, std::memory_order_relaxed);
  }
  void Pop() {
    depth_.store(depth_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  }

  // Frames [0, Depth()) root first (at most kCapacity are stored; deeper pushes are counted
  // but not kept). A sample copies the outermost 32 of them (SampleSlot::kMaxLabels): labels
  // nested deeper than 32 are on the stack but in no sample.
  uint32_t Depth() const { return depth_.load(std::memory_order_relaxed); }
  const LabelFrame& frame(uint32_t i) const { return frames_[i]; }

 private:
  std::atomic<uint32_t> depth_{0};
  LabelFrame frames_[kCapacity];
};

}  // namespace strata

// The calling thread's profiling stack; null when the thread is not registered.
// initial-exec TLS: a plain %fs load, safe in signal handlers (libstrata_base.so is loaded
// at start-up, so static TLS is available). "_v2": label ABI 2 (see ABI at the top).
extern __thread strata::ProfilingStack* strata_t_profiling_stack_v2
    __attribute__((tls_model("initial-exec")));

// STRATA_INTERNAL_PUSH_SITE(out): `out` (const void*) = the address of this very instruction,
// in whatever function the enclosing code was inlined into (one `lea`/`adr`, no memory
// access); null where the architecture has no such instruction here.
#if defined(__x86_64__)
#define STRATA_INTERNAL_PUSH_SITE(out) __asm__ __volatile__("0: lea 0b(%%rip), %0" : "=r"(out))
#elif defined(__aarch64__)
#define STRATA_INTERNAL_PUSH_SITE(out) __asm__ __volatile__("0: adr %0, 0b" : "=r"(out))
#else
#define STRATA_INTERNAL_PUSH_SITE(out) ((out) = nullptr)
#endif

namespace strata {

class AutoLabel {
 public:
  AutoLabel(const char* label, Category category, const char* dynamic_string = nullptr) {
    if (__builtin_expect(!ProfilerIsActive(), 1)) return;
    stack_ = strata_t_profiling_stack_v2;
    if (stack_) {
      const void* push_site;
      STRATA_INTERNAL_PUSH_SITE(push_site);
      stack_->Push(label, dynamic_string, this, category, push_site);
    }
  }
  // The dynamic string from `get_dynamic_string()` (returning const char*), called only when
  // a session is active: STRATA_LABEL_DYNAMIC does not evaluate its argument otherwise.
  template <typename GetDynamicString>
  AutoLabel(const char* label, Category category, GetDynamicString&& get_dynamic_string) {
    if (__builtin_expect(!ProfilerIsActive(), 1)) return;
    stack_ = strata_t_profiling_stack_v2;
    if (stack_) {
      const void* push_site;
      STRATA_INTERNAL_PUSH_SITE(push_site);
      stack_->Push(label, get_dynamic_string(), this, category, push_site);
    }
  }
  ~AutoLabel() {
    if (stack_) stack_->Pop();
  }
  AutoLabel(const AutoLabel&) = delete;
  AutoLabel& operator=(const AutoLabel&) = delete;

 private:
  ProfilingStack* stack_ = nullptr;
};

}  // namespace strata

#define STRATA_INTERNAL_CONCAT2(a, b) a##b
#define STRATA_INTERNAL_CONCAT(a, b) STRATA_INTERNAL_CONCAT2(a, b)

#if defined(STRATA_PROFILER_DISABLED)
#define STRATA_LABEL(label, category)
#define STRATA_LABEL_DYNAMIC(label, category, dynamic_string)
#else
// A label for the rest of the scope. `category` is a strata::Category enumerator name.
#define STRATA_LABEL(label, category) \
  ::strata::AutoLabel STRATA_INTERNAL_CONCAT(strata_label_, __LINE__)(label, ::strata::Category::category)
// `dynamic_string` (a const char*) is evaluated only while a session is active.
#define STRATA_LABEL_DYNAMIC(label, category, dynamic_string)                             \
  ::strata::AutoLabel STRATA_INTERNAL_CONCAT(strata_label_, __LINE__)(                    \
      label, ::strata::Category::category,                                                \
      [&]() -> const char* { return (dynamic_string); })
#endif

#endif  // STRATA_BASE_LABELS_H_
