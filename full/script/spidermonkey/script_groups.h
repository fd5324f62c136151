// Performance groups for JavaScript (the performance monitor, full/perfmon/perfmon.h and
// docs/perfmon.md "JavaScript"): so that "which script makes us janky" has an answer.
//
// SpiderMonkey 102 has no stopwatch instrumentation any more (Firefox removed
// js/src/vm/Stopwatch.* and js::PerformanceGroup; /usr/include/mozjs-102 has no trace of
// them), so the hook is where the seed's embedding already was: the embedding runs every
// event's script (evaluating a file, calling a listener, a timer callback) through its own
// JS::Evaluate / JS_CallFunction* calls, and wraps each in a stopwatch whose groups come
// from here: the context's top group, the global's group and the script file's group.
//
//   ScriptGroups groups(cx, {.thread_group = "js-main"});
//   groups.RegisterGlobal(global, "page:inbox");
//   ...
//   {  // one event: call a listener function value
//     perfmon::AutoStopwatch watch(groups.GroupsForFunction(global, listener));
//     JS_CallFunctionValue(cx, global, listener, args, &rval);
//   }
//   perfmon::IterationDone();
//
// Groups: the top group (shared, active; optional), one per registered global (shared,
// active; keyed by the global's JS::Realm, which the GC never moves), one per script file
// (per-item: inactive by default as in the seed, unless options.activate_file_groups or
// SetFileGroupsActive). A function's file is the one its script was compiled from
// (JS_GetFunctionScript + JS_GetScriptFilename), so a listener defined in janky.js is
// charged to janky.js wherever it is registered from. The cost of code that one file's
// function calls in another file goes to the entry point's file (the granularity is the
// embedding's call, as the seed's was the compartment entry).
//
// Thread safety: a ScriptGroups belongs to the context's thread (groups record on one
// thread, perfmon.h); snapshots of its groups are read from anywhere. Destroy it on that
// thread, outside any stopwatch, after IterationDone(), and before JS_DestroyContext.
#ifndef STRATA_FULL_SCRIPT_SPIDERMONKEY_SCRIPT_GROUPS_H_
#define STRATA_FULL_SCRIPT_SPIDERMONKEY_SCRIPT_GROUPS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "full/perfmon/perfmon.h"

struct JSContext;
class JSObject;

namespace strata {
namespace full {
namespace spidermonkey {

struct ScriptGroupOptions {
  // Name of the context's top group (everything run through these groups); empty: none.
  std::string thread_group;
  // One group per script file ("js:<file>"), per-item.
  bool per_file = true;
  // Create file groups active (default: inactive, as per-item groups are).
  bool activate_file_groups = false;
};

class ScriptGroups {
 public:
  explicit ScriptGroups(JSContext* cx, ScriptGroupOptions options = ScriptGroupOptions());
  ~ScriptGroups();
  ScriptGroups(const ScriptGroups&) = delete;
  ScriptGroups& operator=(const ScriptGroups&) = delete;

  // Gives `global` a group of its own, named `name` (shared, active). Again: renames nothing,
  // returns the existing group.
  perfmon::PerformanceGroup* RegisterGlobal(JSObject* global, const std::string& name);
  // The group of `global`'s realm, or null when not registered.
  perfmon::PerformanceGroup* GlobalGroup(JSObject* global) const;
  // The group of script file `file` (created on first use; null when per_file is off).
  perfmon::PerformanceGroup* FileGroup(const std::string& file);
  void SetFileGroupsActive(bool active);

  // Groups of code from `file` running in `global` (either may be null).
  perfmon::GroupList GroupsFor(JSObject* global, const char* file);
  // Groups of a call to `function` (a function object) in `global`: its script's file. A
  // function without a script (a native) gets the global's and the top group only.
  perfmon::GroupList GroupsForFunction(JSObject* global, JSObject* function);
  // Same, for the function stored in `global`'s property `name` (null groups for the file
  // when there is none or it is not a function).
  perfmon::GroupList GroupsForGlobalFunction(JSObject* global, const char* name);

  perfmon::PerformanceGroup* thread_group() const { return thread_group_.get(); }

 private:
  JSContext* const cx_;
  const ScriptGroupOptions options_;
  bool file_groups_active_;
  std::unique_ptr<perfmon::PerformanceGroup> thread_group_;
  std::map<const void*, std::unique_ptr<perfmon::PerformanceGroup>> global_groups_;  // Realm.
  std::map<std::string, std::unique_ptr<perfmon::PerformanceGroup>> file_groups_;
};

}  // namespace spidermonkey
}  // namespace full
}  // namespace strata

#endif  // STRATA_FULL_SCRIPT_SPIDERMONKEY_SCRIPT_GROUPS_H_
