// See join_session.h.
#include "tools/strata/attach/join_session.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "shared/flight/flight_reader.h"
#include "shared/flight/flight_recovery.h"
#include "shared/json/atomic_file.h"
#include "tools/strata/profile_filter.h"
#include "tools/strata/profile_io.h"
#include "tools/strata/profile_model.h"

namespace strata {
namespace attach {
namespace {

double EpochMilliseconds() {
  struct timespec now {};
  clock_gettime(CLOCK_REALTIME, &now);
  return now.tv_sec * 1e3 + now.tv_nsec / 1e6;
}

// The whole file, read through its descriptor (a snapshot: the session goes on writing).
bool ReadAll(int fd, std::vector<uint8_t>* bytes, std::string* error) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    *error = std::string("fstat: ") + std::strerror(errno);
    return false;
  }
  bytes->resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes->size()) {
    const ssize_t n = pread(fd, bytes->data() + done, bytes->size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = std::string("read: ") + std::strerror(errno);
      return false;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  bytes->resize(done);
  return true;
}

// "strata-<pid>-<start ns>.flight": the session start, or -1 when the name is not that.
long long SessionStartOf(const std::string& path, pid_t pid) {
  const std::string name = path.substr(path.rfind('/') + 1);
  const std::string prefix = "strata-" + std::to_string(pid) + "-";
  if (name.rfind(prefix, 0) != 0 || name.size() <= prefix.size() + 7 ||
      name.compare(name.size() - 7, 7, ".flight") != 0) {
    return -1;
  }
  return std::atoll(name.c_str() + prefix.size());
}

}  // namespace

RunningSession::~RunningSession() {
  if (fd_ >= 0) close(fd_);
}

bool RunningSession::Open(pid_t pid, std::string* refusal) {
  refusal->clear();
  pid_ = pid;
  // The process's flight recorder files, newest session first.
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line, newest;
  long long newest_start = -1;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, permissions, offset, device, inode, path;
    fields >> range >> permissions >> offset >> device >> inode;
    std::getline(fields >> std::ws, path);
    if (path.empty() || path[0] != '/' || path.find(" (deleted)") != std::string::npos) continue;
    const long long start = SessionStartOf(path, pid);
    if (start > newest_start) {
      newest_start = start;
      newest = path;
    }
  }
  if (newest.empty()) return false;
  const std::string host_path = "/proc/" + std::to_string(pid) + "/root" + newest;
  const int fd = open(host_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *refusal = "process " + std::to_string(pid) + " is already profiled by Strata, and its session's flight recorder file " +
               newest + " cannot be opened (" + std::strerror(errno) + "); run strata as the process's user or root";
    return false;
  }
  std::vector<uint8_t> bytes;
  std::string error;
  flight::FlightContents contents;
  if (!ReadAll(fd, &bytes, &error) || !flight::ReadFlightContents(bytes.data(), bytes.size(), &contents, &error)) {
    close(fd);
    *refusal = "process " + std::to_string(pid) + " is already profiled by Strata, and this strata cannot read its session's " +
               "flight recorder file " + newest + " (" + error + "): it was made by another Strata version; use the strata " +
               "of the libstrata_base.so that process loaded, or stop that session first";
    return false;
  }
  if (contents.clean_end) {  // A session that has stopped: nothing runs to join.
    close(fd);
    return false;
  }
  fd_ = fd;
  path_ = newest;
  window_start_epoch_ms_ = EpochMilliseconds();
  return true;
}

bool RunningSession::ReadWindow(bool raw_addresses, rapidjson::Document* document, std::string* error) {
  const double window_end_epoch_ms = EpochMilliseconds();
  std::vector<uint8_t> bytes;
  flight::FlightContents contents;
  if (!ReadAll(fd_, &bytes, error) || !flight::ReadFlightContents(bytes.data(), bytes.size(), &contents, error)) {
    *error = path_ + ": " + *error;
    return false;
  }
  // Recovered into a temporary file, loaded back as a profile document.
  const char* tmpdir = std::getenv("TMPDIR");
  std::string temporary = std::string(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") + "/strata-join.XXXXXX";
  if (mkdtemp(&temporary[0]) == nullptr) {
    *error = "cannot create a temporary directory (" + temporary + "): " + std::strerror(errno);
    return false;
  }
  const std::string json = temporary + "/window.json";
  bool ok = false;
  {
    flight::RecoveryOptions options;
    options.symbolicate = !raw_addresses;
    options.live = true;
    AtomicJsonFile file(json);
    ok = file.ok() && flight::WriteRecoveredProfile(contents, options, file.writer(), error) && file.Commit();
    if (ok) ok = cli::LoadProfileDocument(json, document, error);
    else if (error->empty()) *error = file.error();
  }
  unlink(json.c_str());
  rmdir(temporary.c_str());
  if (!ok) return false;
  // The window, on the profile's clock (ms from meta.startTime, the session's start).
  const rapidjson::Value& meta = (*document)["meta"];
  const double session_start_epoch_ms = meta.HasMember("startTime") ? meta["startTime"].GetDouble() : 0;
  char range[96];
  std::snprintf(range, sizeof(range), "%.3f,%.3f", std::max(0.0, window_start_epoch_ms_ - session_start_epoch_ms),
                window_end_epoch_ms - session_start_epoch_ms);
  cli::Profile profile;
  if (!cli::LoadProfileModel(*document, &profile, error)) return false;
  cli::ProfileFilter filter;
  filter.range_text = range;
  cli::FilterSelection selection;
  if (!cli::SelectWithFilter(profile, filter, &selection, error)) {
    *error = "the session's file holds nothing of the window (" + *error + ")";
    return false;
  }
  cli::ApplySelectionToDocument(profile, selection, document);
  return true;
}

}  // namespace attach
}  // namespace strata
