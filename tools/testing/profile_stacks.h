// Reading a Gecko profile thread's stacks in tests: the frames a sample's stack index names,
// through the thread's stackTable, frameTable and stringTable (docs/gecko-writer.md). For tests
// only: thread-compatible, allocates, and a malformed table fails a RapidJSON assertion.
#ifndef STRATA_TOOLS_TESTING_PROFILE_STACKS_H_
#define STRATA_TOOLS_TESTING_PROFILE_STACKS_H_

#include <string>
#include <vector>

#include "rapidjson/document.h"

namespace strata {
namespace testing {

// One frame of a stack: its location string and its category (-1 when null).
struct ProfileFrame {
  std::string location;
  int category;
};

// The frames of stack `stack` (an index into `thread`'s stackTable), root first; empty for a
// negative index.
std::vector<ProfileFrame> StackFrames(const rapidjson::Value& thread, int stack);

// The same for a samples or markers table cell: empty when the cell is null.
std::vector<ProfileFrame> StackFrames(const rapidjson::Value& thread,
                                      const rapidjson::Value& stack_cell);

// Every sample's frames, root first, in the samples table's order.
std::vector<std::vector<ProfileFrame>> SampleStacks(const rapidjson::Value& thread);

// Whether a frame's location contains `text`.
bool HasFrameContaining(const std::vector<ProfileFrame>& frames, const std::string& text);

// The samples of `thread` with a frame whose location contains `text`.
int SamplesWithFrameContaining(const rapidjson::Value& thread, const std::string& text);

}  // namespace testing
}  // namespace strata

#endif  // STRATA_TOOLS_TESTING_PROFILE_STACKS_H_
