// Markers: named events on a thread's timeline, instant or spanning an interval, with an
// optional payload and stack.
//
//   STRATA_MARKER_UNTYPED("Frame start", kGraphics);
//   STRATA_MARKER_UNTYPED("Load", kIo, strata::MarkerOptions::Interval(t0, t1));
//   STRATA_MARKER_TEXT("Log", kOther, {}, "cache miss for key 42");
//   STRATA_MARKER("Request", kNetwork, strata::MarkerOptions::IntervalStart(),
//                 RequestMarker, url, 200);
//
// A typed marker is a struct whose StreamJSONMarkerData's parameters define what is stored:
//
//   struct RequestMarker {
//     static constexpr const char* MarkerTypeName() { return "Request"; }
//     static void StreamJSONMarkerData(strata::JsonWriter& w, const std::string& url,
//                                      int64_t status) {
//       w.StringProperty("url", url);
//       w.IntProperty("status", status);
//     }
//     // Optional: how the front-end shows it (<strata/marker_schema.h>, whose code is in
//     // libstrata_base.so: linking the base tier is enough), the meta.markerSchema entry
//     // named MarkerTypeName().
//     static strata::MarkerSchema MarkerTypeDisplay() {
//       strata::MarkerSchema schema{strata::MarkerSchema::Location::kMarkerTable};
//       schema.AddKeyLabelFormat("url", "URL", strata::MarkerSchema::Format::kUrl);
//       return schema;
//     }
//     // Or, when there is no MarkerTypeDisplay(), the raw entry (Gecko flavour, "data" not
//     // "fields"): static std::string MarkerTypeSchemaJson() { return R"({...})"; }
//   };
//
// The arguments are serialized into the buffer by their parameter types' Serializer (code
// generated at compile time from the signature; no JSON work while recording), and at capture
// the same parameters are deserialized and StreamJSONMarkerData is called. Parameter types
// must be deserializable: integers, floats, bool, enums, std::string, ProfilerString (use
// ProfilerString::Literal for static strings: only the pointer is stored), TimeStamp,
// vectors, optionals... not std::string_view.
//
// Cost: inactive, one relaxed atomic load; arguments are not evaluated. Active, a few stores
// into the thread's staging plus one clock read per time not given (the Strata clock: one
// rdtscp and its conversion table; ~34 ns for an instant marker here against ~16 ns for
// rdtscp alone, docs/benchmarks.md "Markers against the timestamp floor").
// Time: a time not given is TimeStamp::Now()'s clock at recording, the clock of samples and
// of the caller's own Now() calls: in program order a marker is never before a Now() that
// precedes it nor after one that follows it (docs/sampling.md "One clock").
// Thread safety: thread-safe. Async-signal safety: no (markers lock the buffer).
#ifndef STRATA_BASE_MARKERS_H_
#define STRATA_BASE_MARKERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/categories.h"
#include "shared/buffer/staging_area.h"
#include "base/profiler.h"
#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"
#include "shared/buffer/chunked_buffer.h"
#include "shared/buffer/entry_kinds.h"
#include "shared/buffer/entry_serialization.h"
#include "shared/json/json_writer.h"
#include "shared/json/marker_timing.h"
#include "shared/profile/marker_entry.h"

namespace strata {

class MarkerSchema;  // shared/json/marker_schema.h

class MarkerOptions {
 public:
  // Instant, now, on the calling thread, no stack.
  MarkerOptions() = default;

  static MarkerOptions Instant(TimeStamp at = TimeStamp()) {
    return MarkerOptions(MarkerTiming::Instant(at));
  }
  static MarkerOptions Interval(TimeStamp start, TimeStamp end) {
    return MarkerOptions(MarkerTiming::Interval(start, end));
  }
  // An interval from `start` to the moment the marker is recorded (the recorder reads
  // TimeStamp::Now() itself, after the inactive check).
  static MarkerOptions IntervalUntilNow(TimeStamp start) {
    return MarkerOptions(MarkerTiming::Interval(start, TimeStamp()));
  }
  // An interval whose end comes later as an IntervalEnd marker of the same name.
  static MarkerOptions IntervalStart(TimeStamp start = TimeStamp()) {
    return MarkerOptions(MarkerTiming::IntervalStart(start));
  }
  static MarkerOptions IntervalEnd(TimeStamp end = TimeStamp()) {
    return MarkerOptions(MarkerTiming::IntervalEnd(end));
  }

  // Records the calling thread's native stack with the marker.
  MarkerOptions& WithStack() {
    capture_stack_ = true;
    return *this;
  }
  // Puts the marker on another thread's track (default: the calling thread).
  MarkerOptions& OnThread(ThreadId thread) {
    thread_ = thread;
    return *this;
  }

  const MarkerTiming& timing() const { return timing_; }
  bool capture_stack() const { return capture_stack_; }
  ThreadId thread() const { return thread_; }

 private:
  explicit MarkerOptions(MarkerTiming timing) : timing_(timing) {}
  MarkerTiming timing_ = MarkerTiming::Instant(TimeStamp());
  bool capture_stack_ = false;
  ThreadId thread_;
};

namespace base_internal {

using profile::kTextMarkerTag;
using profile::kUntypedMarkerTag;
using profile::MarkerHeaderRef;
using profile::MarkerSchemaFunction;
using profile::MarkerStreamFunction;
using profile::MarkerTypeFunctions;

// Fills `header`'s thread, times (now where unset), name, category and tag, not its stack.
// Returns the calling thread's marker staging (shared/buffer/staging_area.h; created at
// its first marker) to write the entry into, or null to write it to the session buffer:
// the thread is not registered, or the marker goes on another thread's track.
StagingArea* BeginMarker(const ProfilerString& name, Category category,
                           const MarkerOptions& options, uint8_t payload_tag,
                           MarkerHeaderRef* header);

// The most frames a marker's stack keeps.
inline constexpr size_t kMaxMarkerStackFrames = 128;
// Captures the calling thread's native stack into `frames` (return addresses, leaf first,
// starting at the caller of this function's caller's inlined recording helpers); returns
// the frames written. Not inlined: its own frame is the one skipped.
size_t CaptureMarkerStack(uint64_t (&frames)[kMaxMarkerStackFrames]);

// The session buffer (out of session: writes fail cheaply).
ChunkedBuffer& SessionBuffer();
// Moves everything staged in `staging` into the session buffer and rewinds it (only the
// owning thread, when its staging is full).
void FlushAndRewindMarkerStaging(StagingArea* staging);

// Assigns a tag (2..255) to a marker type, once per type per process.
uint8_t RegisterMarkerType(const MarkerTypeFunctions& functions);
// The functions of `tag`, or null for an unknown tag.
const MarkerTypeFunctions* MarkerTypeForTag(uint8_t tag);
// All registered types (for meta.markerSchema).
std::vector<MarkerTypeFunctions> RegisteredMarkerTypes();

template <typename F>
struct StreamFunctionTraits;
template <typename... Args>
struct StreamFunctionTraits<void (*)(JsonWriter&, Args...)> {
  using Payload = std::tuple<std::decay_t<Args>...>;
};

// A schema from `static strata::MarkerSchema MarkerTypeDisplay()` (preferred) or from
// `static std::string MarkerTypeSchemaJson()`. MarkerSchema is only named here: the marker
// type's own file includes shared/json/marker_schema.h, and the call below is compiled where
// the marker type is used.
template <typename T, typename = void>
struct HasSchemaDisplay : std::false_type {};
template <typename T>
struct HasSchemaDisplay<T, std::void_t<decltype(T::MarkerTypeDisplay())>>
    : std::is_same<decltype(T::MarkerTypeDisplay()), MarkerSchema> {};
template <typename T, typename = void>
struct HasSchemaJson : std::false_type {};
template <typename T>
struct HasSchemaJson<T, std::void_t<decltype(T::MarkerTypeSchemaJson())>> : std::true_type {};
template <typename T>
struct HasSchema : std::bool_constant<HasSchemaDisplay<T>::value || HasSchemaJson<T>::value> {};

template <typename MarkerType>
struct TypedMarker {
  using Payload =
      typename StreamFunctionTraits<decltype(&MarkerType::StreamJSONMarkerData)>::Payload;

  static void Stream(EntryReader& reader, JsonWriter& writer) {
    Payload payload;
    reader.ReadIntoObject(payload);
    if (reader.Failed()) return;
    std::apply([&](const auto&... fields) { MarkerType::StreamJSONMarkerData(writer, fields...); },
               payload);
  }
  static std::string Schema() {
    if constexpr (HasSchemaDisplay<MarkerType>::value) {
      return MarkerType::MarkerTypeDisplay().ToJson(MarkerType::MarkerTypeName());
    } else if constexpr (HasSchemaJson<MarkerType>::value) {
      return MarkerType::MarkerTypeSchemaJson();
    } else {
      return std::string();
    }
  }
  static uint8_t Tag() {
    static const uint8_t tag = RegisterMarkerType(
        {MarkerType::MarkerTypeName(), &Stream, HasSchema<MarkerType>::value ? &Schema : nullptr});
    return tag;
  }
};

// Writes one marker entry, [kMarker][header][payload...], into the calling thread's
// staging (no lock; the entry reaches the session buffer in a batch, see staging_area.h),
// or straight into the session buffer for threads that are not registered, markers put on
// another thread's track, and entries too large to stage.
template <typename... Payload>
void WriteMarkerEntry(StagingArea* staging, const MarkerHeaderRef& header,
                      const Payload&... payload) {
  if (__builtin_expect(staging != nullptr, 1)) {
    const size_t entry_bytes = SumBytes(EntryKind::kMarker, header, payload...);
    uint8_t* entry = staging->TryReserveEntry(entry_bytes);
    if (__builtin_expect(entry == nullptr, 0)) {
      // Full (or too large): the batch goes first, so this thread's order is kept.
      FlushAndRewindMarkerStaging(staging);
      entry = staging->TryReserveEntry(entry_bytes);
    }
    if (__builtin_expect(entry != nullptr, 1)) {
      EntryWriter writer(entry, entry_bytes, nullptr, 0);
      writer.WriteObjects(EntryKind::kMarker, header, payload...);
      staging->CommitEntry();
      return;
    }
  }
  SessionBuffer().PutObjects(EntryKind::kMarker, header, payload...);
}

// One marker. The header references `name` (no copy) and, only when a stack was asked for,
// frames on this function's stack. No allocation unless a buffer needs memory it has not
// prepared.
template <typename... Payload>
void RecordMarker(const ProfilerString& name, Category category, const MarkerOptions& options,
                  uint8_t payload_tag, const Payload&... payload) {
  MarkerHeaderRef header;
  StagingArea* const staging = BeginMarker(name, category, options, payload_tag, &header);
  if (__builtin_expect(options.capture_stack(), 0)) {
    uint64_t frames[kMaxMarkerStackFrames];
    header.stack = absl::Span<const uint64_t>(frames, CaptureMarkerStack(frames));
    WriteMarkerEntry(staging, header, payload...);
    return;
  }
  WriteMarkerEntry(staging, header, payload...);
}

// The characters of a string literal (static storage duration), as the macros pass names.
struct LiteralName {
  const char* chars;
  size_t length;
};

// The recording fast path, for the usual marker: recorded by a registered thread on its own
// track, a literal name of at most profile::kMaxCommonMarkerNameLength characters, no stack
// (the caller checked all three, inline: with constant options the checks fold away).
// Reads the clock where a time is missing, reserves the entry in the thread's staging
// (flushing it when full), writes the kind byte and the header with plain stores and returns
// where `payload_bytes` of payload go, with `*staging` set: write them, then
// (*staging)->CommitEntry(). Returns null, having recorded nothing and read no clock, when
// the thread has no staging (not registered, or a forked child's first marker) or the entry
// does not fit: record it with RecordMarker().
uint8_t* BeginStagedMarker(LiteralName name, Category category, const MarkerTiming& timing,
                           uint8_t payload_tag, size_t payload_bytes, StagingArea** staging);
// The same for a marker that reads the clock once (the commonest: an instant, an interval
// start or end, an interval ending or starting now), its arguments in registers: `packed` is
// PackStagedMarker()'s (which time is now, category, tag, phase, payload size), `start_ns`
// and `end_ns` the header's times (those that are now are overwritten). One clock read
// (rdtscp and the conversion table). Falls back to BeginStagedMarker() (which reads the
// clock again) on the same conditions.
uint8_t* BeginStagedMarkerNow(const char* name_chars, size_t name_length, unsigned packed,
                              int64_t start_ns, int64_t end_ns, StagingArea** staging);
// The largest payload BeginStagedMarkerNow() takes (its entry's size is one byte).
inline constexpr size_t kMaxStagedMarkerNowPayloadBytes =
    0x7f - 1 - profile::kCommonMarkerHeaderBytes;
inline constexpr unsigned kStagedMarkerStartIsNow = 1u << 18;
inline constexpr unsigned kStagedMarkerEndIsNow = 1u << 19;
// Which of `timing`'s times are read from the clock, ResolveMarkerTimes' rules: the start of
// an instant, interval or interval start, the end of an interval or interval end, when not
// given. 0: none (BeginStagedMarker() then, no clock read).
constexpr unsigned StagedMarkerTimesNow(const MarkerTiming& timing) {
  return (timing.phase != MarkerPhase::kIntervalEnd && timing.start.IsNull()
              ? kStagedMarkerStartIsNow
              : 0) |
         ((timing.phase == MarkerPhase::kInterval || timing.phase == MarkerPhase::kIntervalEnd) &&
                  timing.end.IsNull()
              ? kStagedMarkerEndIsNow
              : 0);
}
// Category, payload tag, phase, the times that are now (StagedMarkerTimesNow) and the
// payload size (at most kMaxStagedMarkerNowPayloadBytes), in one register.
constexpr unsigned PackStagedMarker(Category category, uint8_t payload_tag, MarkerPhase phase,
                                    unsigned times_now, size_t payload_bytes) {
  return static_cast<unsigned>(category) | (static_cast<unsigned>(payload_tag) << 8) |
         (static_cast<unsigned>(phase) << 16) | times_now |
         (static_cast<unsigned>(payload_bytes) << 24);
}
constexpr MarkerPhase UnpackMarkerPhase(unsigned packed) {
  return static_cast<MarkerPhase>((packed >> 16) & 3);
}

// True when BeginStaged*Marker may take the marker (see above).
inline bool MarkerCanBeStaged(LiteralName name, const MarkerOptions& options) {
  return !options.thread().IsSpecified() && !options.capture_stack() &&
         name.length <= profile::kMaxCommonMarkerNameLength;
}

// One marker with a literal name: the fast path when it applies, else RecordMarker().
template <typename... Payload>
inline void RecordLiteralMarker(LiteralName name, Category category, const MarkerOptions& options,
                                uint8_t payload_tag, const Payload&... payload) {
  const size_t payload_bytes = SumBytes(payload...);
  StagingArea* staging;
  uint8_t* p = nullptr;
  if (__builtin_expect(MarkerCanBeStaged(name, options), 1)) {
    const MarkerTiming& timing = options.timing();
    const unsigned times_now = StagedMarkerTimesNow(timing);
    if (times_now != 0 && payload_bytes <= kMaxStagedMarkerNowPayloadBytes) {
      // The times the phase does not have are written as null, as ResolveMarkerTimes does.
      const bool has_start = timing.phase != MarkerPhase::kIntervalEnd;
      const bool has_end =
          timing.phase == MarkerPhase::kInterval || timing.phase == MarkerPhase::kIntervalEnd;
      p = BeginStagedMarkerNow(name.chars, name.length,
                               PackStagedMarker(category, payload_tag, timing.phase, times_now,
                                                payload_bytes),
                               has_start ? timing.start.ToNanoseconds() : 0,
                               has_end ? timing.end.ToNanoseconds() : 0, &staging);
    } else {
      p = BeginStagedMarker(name, category, timing, payload_tag, payload_bytes, &staging);
    }
  }
  if (p) {
    if constexpr (sizeof...(Payload) > 0) {
      EntryWriter writer(p, payload_bytes, nullptr, 0);
      writer.WriteObjects(payload...);
    }
    staging->CommitEntry();
    return;
  }
  RecordMarker(ProfilerString::LiteralFromPointer(name.chars, name.length), category, options,
               payload_tag, payload...);
}

// Routes a name to the fast path when it is a literal.
template <typename... Payload>
inline void RecordNamedMarker(LiteralName name, Category category, const MarkerOptions& options,
                              uint8_t payload_tag, const Payload&... payload) {
  RecordLiteralMarker(name, category, options, payload_tag, payload...);
}
template <typename... Payload>
inline void RecordNamedMarker(const ProfilerString& name, Category category,
                              const MarkerOptions& options, uint8_t payload_tag,
                              const Payload&... payload) {
  if (__builtin_expect(name.IsLiteral(), 1)) {
    const std::string_view chars = name.View();
    RecordLiteralMarker(LiteralName{chars.data(), chars.size()}, category, options, payload_tag,
                        payload...);
  } else {
    RecordMarker(name, category, options, payload_tag, payload...);
  }
}

}  // namespace base_internal

namespace base_internal {
// What the public functions and the macros below share: `name` is a ProfilerString or, from
// the macros, a LiteralName (no ProfilerString built on the hot path). The session is active.
template <typename Name>
inline void RecordUntypedMarker(const Name& name, Category category,
                                const MarkerOptions& options = MarkerOptions()) {
  RecordNamedMarker(name, category, options, kUntypedMarkerTag);
}
template <typename Name>
inline void RecordTextMarker(const Name& name, Category category, const MarkerOptions& options,
                             std::string_view text) {
  RecordNamedMarker(name, category, options, kTextMarkerTag, text);
}
// A typed marker's argument as its payload field `Field`: a reference to the argument itself
// when it has the field's type (no copy: a ProfilerString's copy is a std::string's), else
// the argument converted (a temporary that lives until the end of the full expression that
// records the marker).
template <typename Field, typename Arg,
          std::enable_if_t<std::is_same<std::decay_t<Arg>, Field>::value, int> = 0>
inline const Field& AsPayloadField(const Arg& arg) {
  return arg;
}
template <typename Field, typename Arg,
          std::enable_if_t<!std::is_same<std::decay_t<Arg>, Field>::value, int> = 0>
inline Field AsPayloadField(const Arg& arg) {
  return Field(arg);
}
template <typename MarkerType, typename Name, typename... Args, size_t... I>
inline void RecordTypedMarkerFields(const Name& name, Category category,
                                    const MarkerOptions& options, std::index_sequence<I...>,
                                    const Args&... args) {
  using Typed = TypedMarker<MarkerType>;
  using Payload = typename Typed::Payload;
  static_assert(sizeof...(Args) == std::tuple_size<Payload>::value,
                "a typed marker takes one argument per StreamJSONMarkerData field");
  // References to the fields: serialized as the Payload tuple itself (Serializer<std::tuple>
  // writes each element in order), the bytes TypedMarker::Stream reads back.
  RecordNamedMarker(
      name, category, options, Typed::Tag(),
      std::tuple<const std::tuple_element_t<I, Payload>&...>(
          AsPayloadField<std::tuple_element_t<I, Payload>>(args)...));
}
template <typename MarkerType, typename Name, typename... Args>
inline void RecordTypedMarker(const Name& name, Category category, const MarkerOptions& options,
                              MarkerType, const Args&... args) {
  RecordTypedMarkerFields<MarkerType>(name, category, options,
                                      std::index_sequence_for<Args...>(), args...);
}
// STRATA_MARKER passes a typed marker's arguments followed by this tag: a C++17 variadic
// macro must be given at least one argument for its "...", and a marker may have none
// (`, ##__VA_ARGS__` is a GNU extension that -Wpedantic and clang reject).
struct EndOfMarkerArguments {};
template <typename MarkerType, typename Name, typename Tuple, size_t... I>
inline void RecordTypedMarkerFromTuple(const Name& name, Category category,
                                       const MarkerOptions& options, MarkerType type,
                                       const Tuple& args, std::index_sequence<I...>) {
  RecordTypedMarker(name, category, options, type, std::get<I>(args)...);
}
template <typename MarkerType, typename Name, typename... ArgsThenEnd>
inline void RecordTypedMarkerUntilEnd(const Name& name, Category category,
                                      const MarkerOptions& options, MarkerType type,
                                      const ArgsThenEnd&... args_then_end) {
  static_assert(std::is_same<typename std::tuple_element<sizeof...(ArgsThenEnd) - 1,
                                                         std::tuple<ArgsThenEnd...>>::type,
                             EndOfMarkerArguments>::value,
                "STRATA_MARKER's arguments end with EndOfMarkerArguments");
  RecordTypedMarkerFromTuple(name, category, options, type, std::forward_as_tuple(args_then_end...),
                             std::make_index_sequence<sizeof...(ArgsThenEnd) - 1>());
}
}  // namespace base_internal

// A marker without payload.
inline void AddMarker(const ProfilerString& name, Category category,
                      const MarkerOptions& options = MarkerOptions()) {
  if (!ProfilerIsActive()) return;
  base_internal::RecordUntypedMarker(name, category, options);
}

// A marker with a text payload ("Text" type: shown in the marker table and tooltip).
inline void AddTextMarker(const ProfilerString& name, Category category,
                          const MarkerOptions& options, std::string_view text) {
  if (!ProfilerIsActive()) return;
  base_internal::RecordTextMarker(name, category, options, text);
}

// A typed marker (see the top of this file).
template <typename MarkerType, typename... Args>
void AddMarker(const ProfilerString& name, Category category, const MarkerOptions& options,
               MarkerType marker_type, const Args&... args) {
  if (!ProfilerIsActive()) return;
  base_internal::RecordTypedMarker(name, category, options, marker_type, args...);
}

}  // namespace strata

// The macros are standard C++17 and C++20 (no `, ##__VA_ARGS__`): -Wall -Wextra -Wpedantic
// -Werror clean under g++ and clang++ (//tests/install:strict_headers_test).
//   STRATA_MARKER_UNTYPED(name, category [, options])
//   STRATA_MARKER_TEXT(name, category, options, text)
//   STRATA_MARKER(name, category, options, MarkerType [, payload arguments...])
#if defined(STRATA_PROFILER_DISABLED)
#define STRATA_MARKER_UNTYPED(name, ...)
#define STRATA_MARKER_TEXT(name, category, options, text)
#define STRATA_MARKER(name, category, options, ...)
#else
// `name` must be a string literal; `category` a strata::Category enumerator name. Nothing
// after the name is evaluated when no session is active.
#define STRATA_INTERNAL_LITERAL_NAME(name) \
  ::strata::base_internal::LiteralName { "" name, sizeof("" name) - 1 }
// "..." is `category` or `category, options`: the enumerator's scope is put before it.
#define STRATA_MARKER_UNTYPED(name, ...)                                                  \
  do {                                                                                    \
    if (::strata::ProfilerIsActive()) {                                                   \
      ::strata::base_internal::RecordUntypedMarker(STRATA_INTERNAL_LITERAL_NAME(name),    \
                                                   ::strata::Category::__VA_ARGS__);      \
    }                                                                                     \
  } while (0)
#define STRATA_MARKER_TEXT(name, category, options, text)                                 \
  do {                                                                                    \
    if (::strata::ProfilerIsActive()) {                                                   \
      ::strata::base_internal::RecordTextMarker(STRATA_INTERNAL_LITERAL_NAME(name),       \
                                                ::strata::Category::category, options,    \
                                                text);                                    \
    }                                                                                     \
  } while (0)
// "..." is `MarkerType` then its payload arguments, if any: the first is taken as the type,
// the rest go on with an end tag after them (RecordTypedMarkerUntilEnd).
#define STRATA_INTERNAL_FIRST(first, ...) first
#define STRATA_INTERNAL_AFTER_FIRST(first, ...) __VA_ARGS__
#define STRATA_MARKER(name, category, options, ...)                                        \
  do {                                                                                     \
    if (::strata::ProfilerIsActive()) {                                                    \
      ::strata::base_internal::RecordTypedMarkerUntilEnd(                                  \
          STRATA_INTERNAL_LITERAL_NAME(name), ::strata::Category::category, options,       \
          STRATA_INTERNAL_FIRST(__VA_ARGS__, ~){},                                         \
          STRATA_INTERNAL_AFTER_FIRST(__VA_ARGS__,                                         \
                                      ::strata::base_internal::EndOfMarkerArguments{}));   \
    }                                                                                      \
  } while (0)
#endif

#endif  // STRATA_BASE_MARKERS_H_
