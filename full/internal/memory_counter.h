// The memory counter: bytes allocated minus bytes freed while it is on, fed by the allocation
// functions libstrata_full.so interposes (malloc, free, calloc, realloc, the aligned ones),
// each of which forwards to the next definition in the process (glibc's, or the program's
// own allocator) and only adds the block's usable size to a counter. Shown as the "Memory"
// track.
//
// When libstrata_full.so is loaded with dlopen, the program's calls stay bound to the
// allocator they found at start-up and the hooks see (almost) nothing. The counter then falls
// back to the allocator's own statistics (glibc's mallinfo2: bytes in use; under a sanitizer,
// whose allocator replaces glibc's and the hooks, the sanitizer's allocated bytes), read once
// per sampling loop.
//
// Thread safety: thread-safe. Async-signal safety: the hooks are as safe as the allocator.
#ifndef STRATA_FULL_INTERNAL_MEMORY_COUNTER_H_
#define STRATA_FULL_INTERNAL_MEMORY_COUNTER_H_

namespace strata {
namespace full {

// Turns counting on or off (off: the hooks only forward, after one relaxed load).
void EnableMemoryCounter(bool enabled);

// True when the hooks are the process's malloc (the full tier was linked at start-up).
bool MemoryHooksAreEffective();

// Sampler thread, once per loop: with ineffective hooks, sets the counter from the
// allocator's statistics.
void SampleMemoryFallback();

}  // namespace full
}  // namespace strata

#endif  // STRATA_FULL_INTERNAL_MEMORY_COUNTER_H_
