// UniqueStacks: a thread's frameTable and stackTable, de-duplicated.
//
// A frame is identified by all of its columns (location string, category, subcategory, line,
// column, relevantForJS, innerWindowID, implementation); a stack by (prefix, frame). Stacks
// are built root first, so a prefix always has a smaller index than the stack that uses it,
// which the front-end needs (a forward prefix freezes it).
//
//   UniqueStrings strings;
//   UniqueStacks stacks(strings);
//   std::optional<uint32_t> stack;                          // null = empty stack
//   stack = stacks.Stack(stack, stacks.LabelFrame("main", kOtherCategory));
//   stack = stacks.Stack(stack, stacks.AddressFrame(0x55d0c0de1234));
//   ... sample refers to *stack ...
//
// Frame location strings decide how the front-end classifies a frame (location.h):
// AddressFrame writes "0x...", NativeSymbolFrame "name (in lib)", LabelFrame a string that is
// guaranteed to stay a label, Frame() takes the location verbatim.
//
// A native frame named at capture can keep where it was sampled: its library (an index into
// the process's `libs`) and the library-relative address (docs/symbols.md, "Addresses kept
// beside names"). They are written as two extra frameTable columns, "address" and "lib", only
// when some frame of the thread has them (null for the other frames); the front-end's Gecko
// importer ignores columns it does not know, `strata symbolicate` reads them.
//
// A label frame can keep its push site (base/labels.h: the absolute address of an instruction
// of the function that pushed it, after inlining, in the same address space as "0x..."
// frames), written as a "pushSite" column only when some frame has one: `strata symbolicate`
// places the label among the inlined frames of the native frame it follows by it
// (docs/symbols.md, "Labels").
//
// Thread safety: none (one per thread writer). Not async-signal-safe.
#ifndef STRATA_SHARED_JSON_UNIQUE_STACKS_H_
#define STRATA_SHARED_JSON_UNIQUE_STACKS_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "shared/json/index_table.h"
#include "shared/json/json_writer.h"
#include "shared/json/unique_strings.h"

namespace strata {

// Where a native frame was sampled: the library (index into the process's `libs`, as
// written) and the address relative to it (absolute - (lib.start - lib.offset), the
// front-end's lib-relative address). A raw, unadjusted address: a return address for a
// caller frame, the pc for the leaf (as in "0x..." frames).
struct NativeAddress {
  uint64_t relative = 0;
  uint32_t lib = 0;
  bool operator==(const NativeAddress& o) const { return relative == o.relative && lib == o.lib; }
};

// One frameTable row, as given by the caller.
struct FrameInfo {
  std::string_view location;            // Used verbatim.
  std::optional<uint32_t> category;     // Index into meta.categories; null = inherit.
  std::optional<uint32_t> subcategory;  // Index into that category's subcategories.
  std::optional<uint32_t> line;         // Position inside the function.
  std::optional<uint32_t> column;
  bool relevant_for_js = false;         // Label frames only: keep in the JS-only view.
  uint64_t inner_window_id = 0;         // Browser page id; 0 = none.
  std::string_view implementation;      // Old JIT tier label; "" = null (ignored by importer).
  std::optional<NativeAddress> native;  // Where a named native frame was sampled.
  uint64_t push_site = 0;               // Label frames: where it was pushed; 0 = unknown.
};

class UniqueStacks {
 public:
  // `strings` is the same thread's string table; it must outlive this object.
  explicit UniqueStacks(UniqueStrings& strings) : strings_(strings) {}
  UniqueStacks(const UniqueStacks&) = delete;
  UniqueStacks& operator=(const UniqueStacks&) = delete;

  // The frame's index, added if new.
  uint32_t Frame(const FrameInfo& frame);
  // An unsymbolicated native frame "0x<hex>" (a raw return address: the front-end itself
  // subtracts 1 from caller addresses). Category null by default: it then inherits the
  // category of the nearest labelled frame towards the root. Fast path: no string formatting
  // once the address is known.
  uint32_t AddressFrame(uint64_t address, std::optional<uint32_t> category = std::nullopt,
                        std::optional<uint32_t> subcategory = std::nullopt);
  // A symbolicated native function "name (in library)" (library = file base name); line,
  // if known, goes to the line column (never into the name: "f (x.cc:12)" reads as JS).
  // `native`, when given, keeps the frame's address beside the name (one frame per address).
  uint32_t NativeSymbolFrame(std::string_view name, std::string_view library,
                             std::optional<uint32_t> category = std::nullopt,
                             std::optional<uint32_t> subcategory = std::nullopt,
                             std::optional<uint32_t> line = std::nullopt,
                             std::optional<NativeAddress> native = std::nullopt);
  // A label frame (profiling-stack label, thread root, ...): the string is adjusted if the
  // front-end would otherwise read it as an address, a native or a JS function. `push_site`:
  // where a profiling-stack label was pushed (0: unknown), see the top of this file.
  uint32_t LabelFrame(std::string_view label, uint32_t category, uint32_t subcategory = 0,
                      bool relevant_for_js = false, std::optional<uint32_t> line = std::nullopt,
                      uint64_t push_site = 0);

  // The stack (prefix, frame), added if new. `prefix` must be a stack returned earlier (or
  // null for a root) and `frame` a frame returned earlier.
  uint32_t Stack(std::optional<uint32_t> prefix, uint32_t frame);
  // Stack() over frames given root first; null for an empty list. Whole frame lists seen
  // before are found with one hash lookup (samples repeat their stacks), checked against
  // the stack table itself, so the cache holds no copy of the frames.
  std::optional<uint32_t> StackFromFrames(const uint32_t* frames_root_first, size_t count);

  // The prefix and the frame of a stack returned earlier (the prefix null for a root).
  std::optional<uint32_t> PrefixOf(uint32_t stack) const;
  uint32_t FrameOf(uint32_t stack) const;

  size_t frame_count() const { return frames_.size(); }
  size_t stack_count() const { return stacks_.size(); }

  // {"schema":{"location":0,"relevantForJS":1,"innerWindowID":2,"implementation":3,"line":4,
  //  "column":5,"category":6,"subcategory":7},"data":[...]}, plus "address":8,"lib":9 when
  //  some frame has a NativeAddress, and "pushSite" (8 or 10) when some frame has a push site.
  void WriteFrameTable(JsonWriter& writer) const;
  // {"schema":{"prefix":0,"frame":1},"data":[[prefix|null,frame],...]}
  void WriteStackTable(JsonWriter& writer) const;

 private:
  static constexpr uint32_t kNull = UINT32_MAX;
  struct FrameKey {
    uint32_t location;
    uint32_t implementation;
    uint32_t line;
    uint32_t column;
    uint32_t category;
    uint32_t subcategory;
    uint64_t inner_window_id;
    bool relevant_for_js;
    uint32_t lib;          // kNull: no native address.
    uint64_t relative;
    uint64_t push_site;    // 0: none.
    bool operator==(const FrameKey& o) const {
      return location == o.location && implementation == o.implementation && line == o.line &&
             column == o.column && category == o.category && subcategory == o.subcategory &&
             inner_window_id == o.inner_window_id && relevant_for_js == o.relevant_for_js &&
             lib == o.lib && relative == o.relative && push_site == o.push_site;
    }
  };
  static uint64_t Hash(const FrameKey& k);
  struct AddressEntry {
    uint64_t address;
    uint32_t category;
    uint32_t subcategory;
    uint32_t frame;
  };
  struct StackEntry {
    uint32_t prefix;  // kNull for a root.
    uint32_t frame;
  };

  uint32_t FrameForKey(const FrameKey& key);
  // True when `stack` is exactly the chain of `frames_root_first` (count >= 1).
  bool StackIs(uint32_t stack, const uint32_t* frames_root_first, size_t count) const;

  UniqueStrings& strings_;
  std::vector<FrameKey> frames_;
  bool has_native_addresses_ = false;        // Some frame has lib/relative.
  bool has_push_sites_ = false;              // Some frame has a push site.
  json_internal::IndexTable frame_index_;    // Into frames_.
  std::vector<AddressEntry> addresses_;      // AddressFrame() cache.
  json_internal::IndexTable address_index_;  // Into addresses_.
  std::vector<StackEntry> stacks_;
  json_internal::IndexTable stack_index_;    // Into stacks_.
  // StackFromFrames() cache: the stacks of whole frame lists, by the lists' hash.
  struct PathEntry {
    uint32_t stack;
    uint32_t depth;
  };
  std::vector<PathEntry> paths_;
  json_internal::IndexTable path_index_;     // Into paths_.
};

}  // namespace strata

#endif  // STRATA_SHARED_JSON_UNIQUE_STACKS_H_
