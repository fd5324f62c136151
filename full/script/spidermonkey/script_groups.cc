// Performance groups for JavaScript (script_groups.h).
#include "full/script/spidermonkey/script_groups.h"

#include <js/PropertyAndElement.h>
#include <js/Realm.h>
#include <js/RootingAPI.h>
#include <jsapi.h>
#include <jsfriendapi.h>

namespace strata {
namespace full {
namespace spidermonkey {

namespace pm = strata::perfmon;

ScriptGroups::ScriptGroups(JSContext* cx, ScriptGroupOptions options)
    : cx_(cx), options_(std::move(options)), file_groups_active_(options_.activate_file_groups) {
  if (!options_.thread_group.empty()) {
    thread_group_ = std::make_unique<pm::PerformanceGroup>(options_.thread_group);
  }
}

ScriptGroups::~ScriptGroups() = default;

pm::PerformanceGroup* ScriptGroups::RegisterGlobal(JSObject* global, const std::string& name) {
  JS::Realm* realm = global ? JS::GetObjectRealmOrNull(global) : nullptr;
  if (realm == nullptr) return nullptr;
  std::unique_ptr<pm::PerformanceGroup>& group = global_groups_[realm];
  if (!group) group = std::make_unique<pm::PerformanceGroup>(name);
  return group.get();
}

pm::PerformanceGroup* ScriptGroups::GlobalGroup(JSObject* global) const {
  JS::Realm* realm = global ? JS::GetObjectRealmOrNull(global) : nullptr;
  if (realm == nullptr) return nullptr;
  auto it = global_groups_.find(realm);
  return it == global_groups_.end() ? nullptr : it->second.get();
}

pm::PerformanceGroup* ScriptGroups::FileGroup(const std::string& file) {
  if (!options_.per_file) return nullptr;
  std::unique_ptr<pm::PerformanceGroup>& group = file_groups_[file];
  if (!group) {
    group = std::make_unique<pm::PerformanceGroup>("js:" + file,
                                                   pm::PerformanceGroup::Kind::kPerItem);
    group->SetActive(file_groups_active_);
  }
  return group.get();
}

void ScriptGroups::SetFileGroupsActive(bool active) {
  file_groups_active_ = active;
  for (auto& entry : file_groups_) entry.second->SetActive(active);
}

pm::GroupList ScriptGroups::GroupsFor(JSObject* global, const char* file) {
  pm::GroupList groups;
  groups.Add(thread_group_.get());
  groups.Add(GlobalGroup(global));
  if (file != nullptr) groups.Add(FileGroup(file));
  return groups;
}

pm::GroupList ScriptGroups::GroupsForFunction(JSObject* global, JSObject* function) {
  JS::RootedObject global_root(cx_, global);  // JS_GetFunctionScript may GC.
  std::string file;
  bool has_file = false;
  if (function != nullptr) {
    JS::RootedObject function_root(cx_, function);
    JS::RootedFunction fun(cx_, JS_GetObjectFunction(function_root));
    if (fun) {
      // A lazy function's script is created on demand: in its own realm.
      JSAutoRealm realm(cx_, function_root);
      JSScript* script = JS_GetFunctionScript(cx_, fun);
      const char* name = script != nullptr ? JS_GetScriptFilename(script) : nullptr;
      if (name != nullptr) {
        file = name;
        has_file = true;
      }
      if (JS_IsExceptionPending(cx_)) JS_ClearPendingException(cx_);
    }
  }
  return GroupsFor(global_root, has_file ? file.c_str() : nullptr);
}

pm::GroupList ScriptGroups::GroupsForGlobalFunction(JSObject* global, const char* name) {
  if (global == nullptr) return GroupsFor(nullptr, nullptr);
  JS::RootedObject root(cx_, global);
  JSAutoRealm realm(cx_, root);
  JS::RootedValue value(cx_);
  if (!JS_GetProperty(cx_, root, name, &value) || !value.isObject()) {
    if (JS_IsExceptionPending(cx_)) JS_ClearPendingException(cx_);
    return GroupsFor(root, nullptr);
  }
  return GroupsForFunction(root, &value.toObject());
}

}  // namespace spidermonkey
}  // namespace full
}  // namespace strata
