#include "tools/testing/profile_stacks.h"

#include <algorithm>

namespace strata {
namespace testing {

std::vector<ProfileFrame> StackFrames(const rapidjson::Value& thread, int stack) {
  const rapidjson::Value& strings = thread["stringTable"];
  const rapidjson::Value& frames = thread["frameTable"];
  const rapidjson::Value& stacks = thread["stackTable"];
  const int location_column = frames["schema"]["location"].GetInt();
  const int category_column = frames["schema"]["category"].GetInt();
  const int prefix_column = stacks["schema"]["prefix"].GetInt();
  const int frame_column = stacks["schema"]["frame"].GetInt();
  std::vector<ProfileFrame> out;  // Leaf first while walking, then turned around.
  while (stack >= 0) {
    const rapidjson::Value& row = stacks["data"][stack];
    const rapidjson::Value& frame = frames["data"][row[frame_column].GetInt()];
    const rapidjson::Value& category = frame[category_column];
    out.push_back(ProfileFrame{strings[frame[location_column].GetInt()].GetString(),
                               category.IsNull() ? -1 : category.GetInt()});
    stack = row[prefix_column].IsNull() ? -1 : row[prefix_column].GetInt();
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<ProfileFrame> StackFrames(const rapidjson::Value& thread,
                                      const rapidjson::Value& stack_cell) {
  return StackFrames(thread, stack_cell.IsNull() ? -1 : stack_cell.GetInt());
}

std::vector<std::vector<ProfileFrame>> SampleStacks(const rapidjson::Value& thread) {
  const int stack_column = thread["samples"]["schema"]["stack"].GetInt();
  std::vector<std::vector<ProfileFrame>> out;
  for (const rapidjson::Value& sample : thread["samples"]["data"].GetArray()) {
    out.push_back(StackFrames(thread, sample[stack_column]));
  }
  return out;
}

bool HasFrameContaining(const std::vector<ProfileFrame>& frames, const std::string& text) {
  return std::any_of(frames.begin(), frames.end(), [&](const ProfileFrame& frame) {
    return frame.location.find(text) != std::string::npos;
  });
}

int SamplesWithFrameContaining(const rapidjson::Value& thread, const std::string& text) {
  int count = 0;
  for (const std::vector<ProfileFrame>& frames : SampleStacks(thread)) {
    if (HasFrameContaining(frames, text)) ++count;
  }
  return count;
}

}  // namespace testing
}  // namespace strata
