// The full tier (libstrata_full.so): loaded later by the main application, linked or with
// dlopen. When it starts it takes over the base tier's running session in place — the same
// buffer, thread registry and timers, no copy, no gap — and adds what base leaves out: the
// memory counter fed by allocation hooks, the sampler's overhead in the profile, CPU use of
// threads that never registered. Without a base session it starts one of its own. All the
// base API (labels, markers, counters, ProfilerSaveProfile...) keeps working and records into
// the same buffer. See docs/takeover.md. The library also holds the always-on performance
// monitor (full/perfmon/perfmon.h, C entry points in full/perfmon/perfmon_c.h;
// docs/perfmon.md), whose headers come with it.
//
// In a child made by fork() (without exec) the profiler is off for good: StartFull starts
// nothing, FullIsInCharge is false, the rest returns at once (docs/session.md, "fork").
//
// Thread safety: every function is thread-safe. Async-signal safety: none.
#ifndef STRATA_FULL_FULL_H_
#define STRATA_FULL_FULL_H_

#include "base/profiler.h"

namespace strata {
namespace full {

struct FullSettings {
  bool memory_counter = true;        // Bytes allocated minus freed, from allocation hooks.
  bool unregistered_threads = true;  // CPU use of unregistered threads, as markers.
  double unregistered_threads_interval_ms = 100;  // How often they are looked at.
};

struct StartReport {
  bool took_over_base_session = false;  // A base session was running at the call and is now
                                        // full's.
  bool already_in_charge = false;       // A repeated StartFull: the full tier was in charge
                                        // already, nothing was taken over.
  double sampler_handover_ms = 0;       // Sampler thread hand-over (samples continue meanwhile).
  uint64_t buffer_blocks_before = 0;    // Blocks already in the buffer at takeover.
};

// Starts the full tier: takes over a running base session, or starts a new session with
// `session` settings when none runs. A repeated call while the full tier is in charge takes
// nothing over (already_in_charge; took_over_base_session is false): it applies `settings`,
// and starts a session with `session` only when none runs (after StopFull).
StartReport StartFull(const ProfilerSettings& session = ProfilerSettings(),
                      const FullSettings& settings = FullSettings());
// Stops the session (data dropped; save it first). The full tier stays in charge: the next
// ProfilerStart or StartFull starts a full session.
void StopFull();
// Hands the session back to the base tier (it keeps running with base's sampler) and
// releases everything of the full tier (its sampler, IPC listener, extension). The library
// itself stays mapped after a dlclose (it is linked -z nodelete, docs/takeover.md): a later
// dlopen finds the same copy, and StartFull can run again.
void ShutdownFull();
bool FullIsInCharge();

}  // namespace full
}  // namespace strata

// For programs that dlopen libstrata_full.so: start with default settings, and shut down.
// strata_full_start returns 0 when a base session was running at the call and was taken
// over, 1 when the full tier started (a new session was started, or this process is an IPC
// child that follows its parent's session), 2 when the full tier was already in charge (a
// repeated call: nothing taken over; a session is started only if none ran), -1 when nothing
// started (a fork()ed child).
extern "C" int strata_full_start(void);
extern "C" void strata_full_shutdown(void);
// A text marker on the calling thread (name and text are copied), for dlopen users.
extern "C" void strata_full_add_text_marker(const char* name, const char* text);

#endif  // STRATA_FULL_FULL_H_
