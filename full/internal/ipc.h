// The multi-process glue of the full tier (docs/ipc.md): what full_tier.cc calls, and the
// parent and child ends of a session over IPC.
//
// Thread safety: every function is thread-safe. Async-signal safety: none.
#ifndef STRATA_FULL_INTERNAL_IPC_H_
#define STRATA_FULL_INTERNAL_IPC_H_

#include <memory>
#include <string>

#include "full/multiprocess.h"

namespace strata {
namespace profile {
struct CaptureInputs;
}  // namespace profile

namespace full {

// --- Called by full_tier.cc.

// From StartFull (full's mutex held), after the tier extension is attached: a process
// spawned by a profiled parent (STRATA_IPC_PARENT set) connects and takes the parent's
// session. True when it follows a parent: StartFull must not start a session of its own.
bool IpcOnStartFull();
// From ShutdownFull: a child sends its exit profile and leaves; a parent stops listening.
void IpcOnShutdownFull();
// The tier extension's adjust_capture (tier_extension.h): a child capturing for its parent
// writes a sub-process profile; a parent gathers its children's into its own.
void IpcAdjustCapture(profile::CaptureInputs& inputs);

// StartIpcParent's core (full_tier.cc): starts the parent end only while the full tier is in
// charge (it gathers the children), holding the full tier's lock so that ShutdownFull cannot
// come in between; false with *error otherwise.
bool StartIpcParentInCharge(const IpcSettings& settings, std::string* error);

// --- The two ends (ipc_parent.h and its .cc files, ipc_child.cc).

class IpcParent;
class IpcChild;

// The parent end, once started (null before).
IpcParent* RunningIpcParent();
bool StartIpcParentImpl(const IpcSettings& settings, std::string* error);
void ShutdownIpcParent();
void FillParentStatus(IpcStatus* status);
std::string ParentSocketPath();
// Capture side: starts gathering the children's profiles and fills the capture's inputs.
void AdjustParentCapture(profile::CaptureInputs& inputs);

// The child end, once connected (null before, or when not a child).
IpcChild* RunningIpcChild();
bool StartIpcChild(const std::string& socket_path);
void ShutdownIpcChild();
void FillChildStatus(IpcStatus* status);
bool ChildFollowsParent();
std::string ChildParentSocketPath();
// Capture side: true when the calling thread is capturing for the parent (the inputs were
// adjusted for a sub-process profile).
bool AdjustChildCapture(profile::CaptureInputs& inputs);

}  // namespace full
}  // namespace strata

#endif  // STRATA_FULL_INTERNAL_IPC_H_
