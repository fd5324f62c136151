// Which file a process saves its STRATA_SHUTDOWN profile to, when the path has no "%p".
//
// The environment, and so STRATA_SHUTDOWN, is inherited by every process a profiled program
// starts; each dynamically linked one loads the preloaded library and saves at its exit. With
// a path without "%p" they would all write the same file, the last to exit winning (usually the
// parent, whose profile then replaced its children's). So the first process of the tree keeps
// the path as given, and a descendant saves to its own file: the path with ".<pid>" inserted
// before a final ".json" (or appended), e.g. /tmp/p.json -> /tmp/p.4242.json.
//
// A process is a descendant when one of its ancestors (parent, grandparent... read from
// /proc/<pid>/stat) started with the same STRATA_SHUTDOWN value (/proc/<pid>/environ, the
// environment it was exec'ed with, which is what its copy of the library read) and has this
// library mapped (/proc/<pid>/maps, matched by device and inode or by file name). Nothing is changed in
// the environment the program and its children see. Decided once, at load, while the parent
// of a just-exec'ed process is normally still there. When /proc cannot be read (another user's
// ancestor, a restricted /proc) the walk stops there and the path is kept as given.
//
// Thread safety: ShutdownPathForThisProcess() reads /proc with short-lived close-on-exec
// descriptors; call it at load time. The other functions are pure. Not async-signal-safe.
#ifndef STRATA_BASE_INTERNAL_SHUTDOWN_PATH_H_
#define STRATA_BASE_INTERNAL_SHUTDOWN_PATH_H_

#include <sys/types.h>

#include <string>
#include <string_view>

namespace strata {
namespace base_internal {

// `path` as this process should save it (still with "%p" to expand at save time): `path`
// itself when it has "%p" or no ancestor shares it, else PerProcessShutdownPath(path).
// `code_address` is any address in this library's code (its mapping identifies the library).
std::string ShutdownPathForThisProcess(const std::string& path, const void* code_address);

// A child of this process (of any of its threads) that has this library mapped (`code_address`
// as above): a profiled process this one started, such as the program a wrapper (`timeout`,
// `nice`, a shell) runs. Its pid and command name (/proc/<pid>/comm); false when there is none
// or /proc cannot tell (no /proc/<pid>/task/<tid>/children). Reads /proc: not at load time
// only, but never on a program's thread (the control thread calls it).
bool FindProfiledChild(const void* code_address, pid_t* child, std::string* child_name);

// `path` with "%p" added: ".%p" before a final ".json" in the file name, else at the end.
std::string PerProcessShutdownPath(const std::string& path);

// The value of `name` in a NUL-separated environment block (/proc/<pid>/environ), the first
// one as getenv would find it; false when it is not there.
bool FindInEnvironmentBlock(std::string_view block, std::string_view name, std::string* value);

// The parent pid in the text of /proc/<pid>/stat (the field after the parenthesised command,
// which may itself hold spaces and parentheses); -1 when it cannot be parsed.
pid_t ParentPidFromStat(std::string_view stat);

// A file mapping as /proc/<pid>/maps prints it: device ("fd:01"), inode and path.
struct MappedFile {
  std::string device;
  unsigned long long inode = 0;
  std::string path;
};

// The file mapped at `address` in the text of a maps file; inode 0 when none is.
MappedFile FileMappedAt(std::string_view maps, unsigned long long address);

// Whether the text of a maps file has a mapping of `file`: the same device and inode, or a
// file of the same name (another build of the library, preloaded from elsewhere).
bool MapsFile(std::string_view maps, const MappedFile& file);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SHUTDOWN_PATH_H_
