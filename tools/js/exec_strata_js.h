// `strata js ...` for the `strata` dispatcher (tools/strata): replaces the calling process with
// the runner, strata_js, found next to the calling binary (the same directory, or ../js/ as in
// bazel-bin), else on PATH.
//
//   if (argc >= 2 && std::string(argv[1]) == "js") return strata::tools::ExecStrataJs(argc - 1, argv + 1);
//
// Thread safety: call before starting threads. Returns only on failure (127, message on
// stderr).
#ifndef STRATA_TOOLS_JS_EXEC_STRATA_JS_H_
#define STRATA_TOOLS_JS_EXEC_STRATA_JS_H_

namespace strata {
namespace tools {

// argv[0] is "js"; argv[1...] are strata_js's arguments.
int ExecStrataJs(int argc, char** argv);

}  // namespace tools
}  // namespace strata

#endif  // STRATA_TOOLS_JS_EXEC_STRATA_JS_H_
