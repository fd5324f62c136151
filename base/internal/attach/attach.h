// Attach sessions (attach.cc, docs/attach.md): a session started inside a running process by
// `strata record -p PID`, after the library was loaded there with dlopen.
//
// Thread safety: thread-safe. Async-signal safety: InAttachedSession is (one atomic load).
#ifndef STRATA_BASE_INTERNAL_ATTACH_H_
#define STRATA_BASE_INTERNAL_ATTACH_H_

namespace strata {
namespace base_internal {

// True while the running session is an attach session (set before it starts, cleared after
// it stopped): its profile says what an attached session lacks (capture.cc).
bool InAttachedSession();

// What an attached session does not have, for the profile's profilingLog ("attached").
inline constexpr const char* kAttachedSessionNote =
    "attached to the running process (strata record -p): threads started after the attach are "
    "sampled from when strata saw them (it looks every 50 ms; pthread_create is not interposed "
    "on a loaded library, so a shorter-lived thread may be missed); blocking calls have no "
    "wait stacks (no wait wrappers: a thread off CPU shows as an unknown wait after its last "
    "sample); no memory hooks";

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_ATTACH_H_
