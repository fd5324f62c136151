// Profile capture: the running session's buffer, read once, written as a Gecko profile.
//
// The buffer is read twice under the session lock: first to collect the native addresses
// (symbolicated in one batch from the ELF symbol tables, unless the session has
// 'rawaddresses'), then to stream every sample, marker and counter value into per-thread
// writers, which are spliced into the document at the end.
//
// Thread safety: thread-safe (takes the session lock; sampling goes on meanwhile and waits
// for the buffer when it has to). Async-signal safety: no.
#ifndef STRATA_BASE_INTERNAL_CAPTURE_H_
#define STRATA_BASE_INTERNAL_CAPTURE_H_

#include <string>

#include "shared/json/json_writer.h"

namespace strata {
namespace base_internal {

// Writes the profile. False with *error set when no session is running or on writer error.
bool WriteSessionProfile(JsonWriter& out, std::string* error);

// Writes the profile to `path` through a temporary file and a rename.
bool SaveSessionProfile(const std::string& path, std::string* error);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_CAPTURE_H_
