// Sample weights and self/total time per function over a whole profile (all processes and
// threads), shared by `summary`, `report` and `convert` (docs/cli.md, "Weights").
//
// Three weights a sample can have:
// * wall: the wall time the sample stands for, i.e. the time to the thread's next sample
//   (as the front-end's traced timing counts it), except that a gap that overlaps a paused
//   range of the thread's process counts as one interval: the thread was not being sampled
//   then. Other gaps are not capped: the base tier writes a sample or a copy for every
//   registered thread at every sampler loop, so a gap is the sampler or the thread waiting
//   for a CPU, which is wall time (gaps of 430 ms were seen with 4 busy processes and a build
//   on 2 CPUs). The thread's last sample stands for one interval (the front-end's rule). A
//   sample time that goes backwards gives 0.
// * cpu: the sample's CPU delta in ms (threadCPUDelta). The first sample of a thread, whose
//   delta the front-end ignores, and unknown deltas weigh 0. A profile without CPU deltas
//   (ProfileHasCpu() false) falls back to one interval per sample, and says so.
// * samples: 1 per sample.
// And two weights of native allocations (docs/memory.md), from the "Native allocation"
// records instead of the samples, for `strata summary`:
// * bytes: the estimated bytes allocated (the records with a positive size);
// * retained: the bytes of the allocations not freed by the end of the profile, matched by
//   address in each thread's records in order, as the front-end's "Retained Memory".
// Self time goes to the stack's leaf function, or, when the leaf is an inlined function
// (DWARF inline frames), to the function it is inlined into (Thread::SelfFunction): the same
// function in a profile named at capture and in one symbolicated with DWARF, as perf's
// `--no-inline` report. Total time goes to every distinct function on the stack, inlined ones
// included (recursion counted once).
//
// Thread safety: pure functions of their input.
#ifndef STRATA_TOOLS_STRATA_FUNCTION_STATS_H_
#define STRATA_TOOLS_STRATA_FUNCTION_STATS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tools/strata/profile_model.h"

namespace strata {
namespace cli {

enum class Weight { kWall, kCpu, kSamples, kBytes, kRetained };

// "wall", "cpu", "samples", "bytes", "retained".
const char* WeightName(Weight weight);
// The accepted names, for messages: "wall, cpu, samples, bytes, retained".
const char* WeightNames();
bool ParseWeight(std::string_view name, Weight* weight);
// bytes and retained: weights of native allocations, not of samples.
inline bool IsAllocationWeight(Weight weight) {
  return weight == Weight::kBytes || weight == Weight::kRetained;
}

struct FunctionTime {
  double self_wall = 0;  // ms
  double total_wall = 0;
  double self_cpu = 0;  // ms (interval per sample without CPU deltas)
  double total_cpu = 0;
  size_t self_samples = 0;
  size_t total_samples = 0;
  double self_bytes = 0;  // Native allocations: estimated bytes allocated.
  double total_bytes = 0;
  double self_retained = 0;  // Of those, not freed by the end.
  double total_retained = 0;

  double Self(Weight weight) const;
  double Total(Weight weight) const;
};

struct FunctionTimes {
  bool cpu = false;  // The cpu weights are CPU deltas (false: interval per sample).
  double wall = 0;   // ms over every sample.
  double cpu_ms = 0;
  size_t samples = 0;
  double bytes = 0;     // Native allocations' estimated bytes, and those retained.
  double retained = 0;
  std::vector<FunctionTime> functions;  // Indexed like Profile::functions.

  double Total(Weight weight) const;
};

// The wall weight (ms) of every sample of `thread`, in order.
std::vector<double> SampleWallMs(const Profile& profile, const Thread& thread);
double ThreadWallMs(const Profile& profile, const Thread& thread);

// The cpu weight (ms) of sample i of `thread`: its CPU delta when `cpu`, else the interval.
double SampleCpuMs(const Thread& thread, size_t i, bool cpu, double interval_ms);

// Whether the profile's samples carry CPU deltas that can be used as weights.
bool ProfileHasCpu(const Profile& profile);

FunctionTimes ComputeFunctionTimes(const Profile& profile);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_FUNCTION_STATS_H_
