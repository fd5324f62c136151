// A minimal SpiderMonkey 102 embedding, for programs that run scripts themselves: the
// `strata js` runner (tools/js) and the whole-system tests (tests/js). It is application code,
// not part of the profiler: the engine's start-up, contexts and shutdown belong to whoever
// embeds it. It lives next to the adapter only so that SpiderMonkey's headers stay in this
// directory; its own header needs none of them.
//
//   InitEngine(JitMode::kDefault);
//   {
//     auto context = ScriptContext::Create(JitMode::kDefault, &error);  // this thread's
//     context->EvaluateFile("work.js", &error);
//   }
//   ShutdownEngine();
//
// Thread safety: InitEngine/ShutdownEngine once per process (before and after every context);
// a ScriptContext belongs to the thread that created it.
#ifndef STRATA_FULL_SCRIPT_SPIDERMONKEY_EMBEDDING_H_
#define STRATA_FULL_SCRIPT_SPIDERMONKEY_EMBEDDING_H_

#include <memory>
#include <string>

struct JSContext;
class JSObject;

namespace strata {
namespace full {
namespace spidermonkey {

enum class JitMode {
  kDefault,              // Every tier: interpreter, Baseline Interpreter, Baseline, Ion.
  kNoJit,                // JS::DisableJitBackend() before JS_Init: the C++ interpreter only.
  kInterpreter,          // Backend present, every JIT tier switched off for the context.
  kBaselineInterpreter,  // Interpreter and Baseline Interpreter only.
  kBaseline,             // No Ion.
};

// "default", "nojit", "interp", "blinterp", "baseline"; false when unknown.
bool ParseJitMode(const std::string& name, JitMode* mode);
const char* JitModeName(JitMode mode);

// JS_Init, once per process; kNoJit disables the JIT backend first (for every context).
bool InitEngine(JitMode mode, std::string* error);
void ShutdownEngine();

// One JSContext with one global object, on the calling thread. The global has `print(...)`
// and `cpuTimeMs()` (the thread's CPU time in ms, for scripts that burn a known amount).
class ScriptContext {
 public:
  static std::unique_ptr<ScriptContext> Create(JitMode mode, std::string* error);
  ~ScriptContext();  // Destroys the context (detach it from the profiler first).
  ScriptContext(const ScriptContext&) = delete;
  ScriptContext& operator=(const ScriptContext&) = delete;

  JSContext* context() const { return cx_; }
  JSObject* global() const;

  // Runs a script file (named by `path` in its frames) or a string. On failure *error holds
  // the exception ("file:line: message").
  bool EvaluateFile(const std::string& path, std::string* error);
  bool Evaluate(const std::string& code, const std::string& filename, std::string* error);
  // Calls the global function `name` with no arguments.
  bool CallFunction(const std::string& name, std::string* error);

 private:
  struct Roots;
  ScriptContext() = default;
  bool TakeError(std::string* error);

  JSContext* cx_ = nullptr;
  Roots* roots_ = nullptr;
};

}  // namespace spidermonkey
}  // namespace full
}  // namespace strata

#endif  // STRATA_FULL_SCRIPT_SPIDERMONKEY_EMBEDDING_H_
