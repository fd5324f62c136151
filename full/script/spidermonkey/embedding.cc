// The minimal SpiderMonkey embedding (embedding.h). Includes SpiderMonkey's headers, as
// spidermonkey_adapter.cc does; nothing else in the project may.
#include "full/script/spidermonkey/embedding.h"

#include <js/CallAndConstruct.h>
#include <js/CharacterEncoding.h>
#include <js/CompilationAndEvaluation.h>
#include <js/Conversions.h>
#include <js/ErrorReport.h>
#include <js/Exception.h>
#include <js/GlobalObject.h>
#include <js/Initialization.h>
#include <js/PropertyAndElement.h>
#include <js/Realm.h>
#include <js/RootingAPI.h>
#include <js/SourceText.h>
#include <jsapi.h>

#include <time.h>

#include <cstdio>
#include <cstring>

namespace strata {
namespace full {
namespace spidermonkey {

struct ScriptContext::Roots {
  explicit Roots(JSContext* cx) : global(cx) {}
  JS::PersistentRootedObject global;
};

namespace {

const JSClass kGlobalClass = {
    "global", JSCLASS_GLOBAL_FLAGS, &JS::DefaultGlobalClassOps, nullptr, nullptr, nullptr};

// print(...): its arguments as strings, separated by spaces, and a newline, on stdout.
bool Print(JSContext* cx, unsigned argc, JS::Value* vp) {
  JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
  for (unsigned i = 0; i < args.length(); ++i) {
    JS::RootedString string(cx, JS::ToString(cx, args[i]));
    if (!string) return false;
    JS::UniqueChars chars = JS_EncodeStringToUTF8(cx, string);
    if (!chars) return false;
    std::fputs(i ? " " : "", stdout);
    std::fputs(chars.get(), stdout);
  }
  std::fputc('\n', stdout);
  std::fflush(stdout);
  args.rval().setUndefined();
  return true;
}

// cpuTimeMs(): the calling thread's CPU time in milliseconds (CLOCK_THREAD_CPUTIME_ID), so
// that scripts can do a known amount of CPU work.
bool CpuTimeMs(JSContext* cx, unsigned argc, JS::Value* vp) {
  JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  args.rval().setDouble(static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6);
  return true;
}

const JSFunctionSpec kGlobalFunctions[] = {
    JS_FN("print", Print, 0, 0),
    JS_FN("cpuTimeMs", CpuTimeMs, 0, 0),
    JS_FS_END,
};

bool g_initialized = false;

}  // namespace

bool ParseJitMode(const std::string& name, JitMode* mode) {
  static const struct {
    const char* name;
    JitMode mode;
  } kModes[] = {{"default", JitMode::kDefault},
                {"nojit", JitMode::kNoJit},
                {"interp", JitMode::kInterpreter},
                {"blinterp", JitMode::kBaselineInterpreter},
                {"baseline", JitMode::kBaseline}};
  for (const auto& m : kModes) {
    if (name == m.name) {
      *mode = m.mode;
      return true;
    }
  }
  return false;
}

const char* JitModeName(JitMode mode) {
  switch (mode) {
    case JitMode::kDefault:
      return "default";
    case JitMode::kNoJit:
      return "nojit";
    case JitMode::kInterpreter:
      return "interp";
    case JitMode::kBaselineInterpreter:
      return "blinterp";
    case JitMode::kBaseline:
      return "baseline";
  }
  return "?";
}

bool InitEngine(JitMode mode, std::string* error) {
  if (g_initialized) return true;
  if (mode == JitMode::kNoJit) JS::DisableJitBackend();
  if (!JS_Init()) {
    if (error) *error = "JS_Init failed";
    return false;
  }
  g_initialized = true;
  return true;
}

void ShutdownEngine() {
  if (!g_initialized) return;
  JS_ShutDown();
  g_initialized = false;
}

std::unique_ptr<ScriptContext> ScriptContext::Create(JitMode mode, std::string* error) {
  std::unique_ptr<ScriptContext> context(new ScriptContext);
  JSContext* cx = JS_NewContext(JS::DefaultHeapMaxBytes);
  if (!cx) {
    if (error) *error = "JS_NewContext failed";
    return nullptr;
  }
  context->cx_ = cx;
  if (!JS::InitSelfHostedCode(cx)) {
    if (error) *error = "JS::InitSelfHostedCode failed";
    return nullptr;  // The destructor destroys cx.
  }
  const bool blinterp = mode == JitMode::kDefault || mode == JitMode::kBaselineInterpreter ||
                        mode == JitMode::kBaseline;
  const bool baseline = mode == JitMode::kDefault || mode == JitMode::kBaseline;
  const bool ion = mode == JitMode::kDefault;
  if (mode != JitMode::kNoJit) {
    JS_SetGlobalJitCompilerOption(cx, JSJITCOMPILER_BASELINE_INTERPRETER_ENABLE, blinterp);
    JS_SetGlobalJitCompilerOption(cx, JSJITCOMPILER_BASELINE_ENABLE, baseline);
    JS_SetGlobalJitCompilerOption(cx, JSJITCOMPILER_ION_ENABLE, ion);
  }
  context->roots_ = new Roots(cx);
  JS::RealmOptions options;
  context->roots_->global =
      JS_NewGlobalObject(cx, &kGlobalClass, nullptr, JS::FireOnNewGlobalHook, options);
  if (!context->roots_->global) {
    if (error) *error = "JS_NewGlobalObject failed";
    return nullptr;
  }
  JSAutoRealm realm(cx, context->roots_->global);
  if (!JS::InitRealmStandardClasses(cx) ||
      !JS_DefineFunctions(cx, context->roots_->global, kGlobalFunctions)) {
    context->TakeError(error);
    return nullptr;
  }
  return context;
}

ScriptContext::~ScriptContext() {
  delete roots_;  // Unroots the global before the context goes.
  if (cx_) JS_DestroyContext(cx_);
}

JSObject* ScriptContext::global() const { return roots_ ? roots_->global.get() : nullptr; }

bool ScriptContext::TakeError(std::string* error) {
  if (!error) {
    JS_ClearPendingException(cx_);
    return false;
  }
  JS::ExceptionStack stack(cx_);
  if (!JS::StealPendingExceptionStack(cx_, &stack)) {
    *error = "uncatchable exception (out of memory, or the script was terminated)";
    return false;
  }
  JS::ErrorReportBuilder report(cx_);
  if (!report.init(cx_, stack, JS::ErrorReportBuilder::WithSideEffects)) {
    *error = "an exception that could not be reported";
    JS_ClearPendingException(cx_);
    return false;
  }
  const JSErrorReport* r = report.report();
  std::string text;
  if (r && r->filename) {
    text = std::string(r->filename) + ":" + std::to_string(r->lineno) + ": ";
  }
  text += report.toStringResult().c_str() ? report.toStringResult().c_str() : "exception";
  *error = text;
  return false;
}

bool ScriptContext::EvaluateFile(const std::string& path, std::string* error) {
  JSAutoRealm realm(cx_, roots_->global);
  JS::CompileOptions options(cx_);
  options.setFileAndLine(path.c_str(), 1);
  JS::RootedValue result(cx_);
  if (!JS::EvaluateUtf8Path(cx_, options, path.c_str(), &result)) return TakeError(error);
  return true;
}

bool ScriptContext::Evaluate(const std::string& code, const std::string& filename,
                             std::string* error) {
  JSAutoRealm realm(cx_, roots_->global);
  JS::CompileOptions options(cx_);
  options.setFileAndLine(filename.c_str(), 1);
  JS::SourceText<mozilla::Utf8Unit> source;
  if (!source.init(cx_, code.data(), code.size(), JS::SourceOwnership::Borrowed)) {
    return TakeError(error);
  }
  JS::RootedValue result(cx_);
  if (!JS::Evaluate(cx_, options, source, &result)) return TakeError(error);
  return true;
}

bool ScriptContext::CallFunction(const std::string& name, std::string* error) {
  JSAutoRealm realm(cx_, roots_->global);
  JS::RootedValue result(cx_);
  if (!JS_CallFunctionName(cx_, roots_->global, name.c_str(), JS::HandleValueArray::empty(),
                           &result)) {
    return TakeError(error);
  }
  return true;
}

}  // namespace spidermonkey
}  // namespace full
}  // namespace strata
