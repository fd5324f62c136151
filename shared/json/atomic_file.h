// AtomicJsonFile: writes a JSON document to a temporary file in the destination's directory
// and renames it into place on Commit(), so that `path` only ever holds a complete profile
// (or its previous content). Anything else (an error, or destruction without Commit())
// removes the temporary file. The temporary file is unnamed (O_TMPFILE) while it is written,
// so a process killed in the middle leaves nothing; it is linked at `path` when nothing is
// there, else at a temporary name renamed over `path`. Filesystems without O_TMPFILE get a
// named temporary file from the start (left behind if the process is killed meanwhile).
//
//   AtomicJsonFile file("/tmp/profile.json");
//   if (!file.ok()) { report(file.error()); return; }
//   WriteProfile(file.writer());
//   if (!file.Commit()) report(file.error());   // "write(/tmp/.profile.json.tmp-..): ..."
//
// The file gets mode 0666 minus the umask, like any file the program creates. A device, pipe
// or socket at `path` is refused (never replaced); a directory makes the rename fail.
//
// Thread safety: none (one object per thread). Not async-signal-safe.
#ifndef STRATA_SHARED_JSON_ATOMIC_FILE_H_
#define STRATA_SHARED_JSON_ATOMIC_FILE_H_

#include <memory>
#include <string>

#include "shared/json/json_writer.h"

namespace strata {

class AtomicJsonFile {
 public:
  // Creates the temporary file. Check ok().
  explicit AtomicJsonFile(std::string path);
  // Removes the temporary file unless committed.
  ~AtomicJsonFile();
  AtomicJsonFile(const AtomicJsonFile&) = delete;
  AtomicJsonFile& operator=(const AtomicJsonFile&) = delete;

  // The writer for the document; writes go to the temporary file (usable even after an
  // error; output is then dropped).
  JsonWriter& writer() { return *writer_; }

  // Flushes, checks that the document is complete (no open object/array, no writer error),
  // syncs, closes and renames. Returns false with error() set on any failure; `path` is then
  // untouched and the temporary file removed.
  bool Commit();

  bool ok() const { return error_.empty() && writer_->ok(); }
  // The first error, naming the failed step and file; "" if none.
  const std::string& error() const { return error_.empty() ? writer_->error() : error_; }
  const std::string& path() const { return path_; }
  const std::string& temporary_path() const { return temporary_path_; }

 private:
  void Abandon();
  void SetErrno(const char* step, const std::string& file);
  bool NameUnnamedFile();

  std::string path_;
  std::string directory_;
  // The name the file gets before the rename (or has from the start without O_TMPFILE).
  std::string temporary_path_;
  bool unnamed_ = false;  // An O_TMPFILE file, not linked yet.
  bool linked_at_destination_ = false;
  int fd_ = -1;
  bool committed_ = false;
  std::string error_;
  std::unique_ptr<FdJsonOutput> output_;
  std::unique_ptr<JsonWriter> writer_;
};

}  // namespace strata

#endif  // STRATA_SHARED_JSON_ATOMIC_FILE_H_
