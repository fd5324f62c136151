// The preload tier's wrappers of libc's signal functions (signal_interposers.cc): while a
// session samples with signal S, the program's sigaction/signal calls for S are recorded as
// its action instead of replacing the sampling handler, and S is removed from the masks it
// blocks and the sets it reads by signalfd or sigwait. See docs/sampling.md, "Signal
// ownership".
#ifndef STRATA_BASE_INTERNAL_SIGNAL_INTERPOSERS_H_
#define STRATA_BASE_INTERNAL_SIGNAL_INTERPOSERS_H_

namespace strata {
namespace base_internal {

// Resolves the real functions and notes libunwind's code range (its calls are forwarded
// unchanged). Call at session start, after libunwind is loaded, outside signal context.
// Thread-safe; not async-signal-safe.
void PrepareSignalInterposers();

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SIGNAL_INTERPOSERS_H_
