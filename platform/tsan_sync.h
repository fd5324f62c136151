// Happens-before edges told to ThreadSanitizer outright (docs/reliability.md, "Sanitizers",
// the fifth round). TSan drops the synchronisation of atomics run inside the real function
// of one of its blocking interceptors: around nanosleep, pthread_cond_wait, poll, sem_wait,
// waitpid... (BLOCK_REAL) it raises the thread's ignore_interceptors, and every __tsan_atomic*
// call then runs the bare operation, with no acquire or release recorded. In a program linked
// with -fsanitize=thread, libtsan comes before libstrata_base.so, so Strata's wait wrappers
// are that real function, and what they publish at a wait's end (the thread-written wait
// samples into its ring, the unwind-table copy slots of their walk) lost its edge to the
// sampler thread: false race reports, one of which deadlocked in TSan's own report
// (clock_order_test) and another failed ipc_limit_test. __tsan_acquire/__tsan_release are
// not ignored there (only ignore_sync stops them), so the few atomics whose edge guards plain
// data on those paths repeat it with them: StrataTsanRelease(&a) just before a release store
// to `a`, StrataTsanAcquire(&a) just after an acquire load (or CAS) of `a`.
//
// Other builds: empty inline functions. Thread-safe; async-signal-safe; header-only.
#ifndef STRATA_PLATFORM_TSAN_SYNC_H_
#define STRATA_PLATFORM_TSAN_SYNC_H_

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* address);
extern "C" void __tsan_release(void* address);
#endif

namespace strata {

inline void StrataTsanAcquire(const volatile void* address) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(const_cast<void*>(address));
#else
  (void)address;
#endif
}

inline void StrataTsanRelease(const volatile void* address) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(const_cast<void*>(address));
#else
  (void)address;
#endif
}

}  // namespace strata

#endif  // STRATA_PLATFORM_TSAN_SYNC_H_
