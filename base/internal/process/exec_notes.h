// Notes of the programs a process starts, for `strata record` (issue 34: a program Strata
// cannot enter -- statically linked, set-user-ID, run with LD_PRELOAD cleared -- started
// inside a recorded tree was missing from the profile without a word).
//
// Under `strata record` (STRATA_RECORD_NOTES=<directory>, the record's private directory),
// each exec and posix_spawn of a preloaded process leaves a file <pid>.exec there: the path
// the program was started by (as given: a name without '/' is looked up in PATH by the
// reader) and whether the new program's environment still preloads Strata. record reads them
// after the run: a process that saved no profile and whose program Strata could not enter is
// named in the profile (meta.strataNotEntered) and on its standard error (docs/cli.md).
//
// Thread safety: thread-safe. Async-signal-safe (raw system calls on the caller's stack
// only: the exec wrappers may run in a signal handler or a vfork()ed child); the note's file
// descriptor is open for the length of one write.
#ifndef STRATA_BASE_INTERNAL_PROCESS_EXEC_NOTES_H_
#define STRATA_BASE_INTERNAL_PROCESS_EXEC_NOTES_H_

#include <spawn.h>
#include <sys/types.h>

namespace strata {
namespace base_internal {

// The posix_spawn and posix_spawnp of the library after this one (libc's), which the
// wrappers call; resolved by the library's constructor (later, by the first call).
using SpawnFunction = int (*)(pid_t*, const char*, const posix_spawn_file_actions_t*,
                              const posix_spawnattr_t*, char* const[], char* const[]);
void ResolveProgramStartFunctions();
SpawnFunction RealSpawnFunction(bool search_path);

// The posix_spawn wrappers' body: libc's posix_spawn (posix_spawnp when `search_path`), then,
// once the child has its pid, NoteProgramStart for it.
int SpawnAndNote(bool search_path, pid_t* pid, const char* path,
                 const posix_spawn_file_actions_t* actions, const posix_spawnattr_t* attributes,
                 char* const argv[], char* const envp[]);

// Where the notes go (the record's directory), from the environment at load; not
// thread-safe (the library's constructor). A path too long for a note's name leaves notes off.
void SetExecNotesDirectory(const char* directory);

// Notes that process `pid` starts the program at `path` with environment `environment`
// (null: this process's). Nothing when no directory was set or `path` is null.
void NoteProgramStart(pid_t pid, const char* path, char* const* environment);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_PROCESS_EXEC_NOTES_H_
