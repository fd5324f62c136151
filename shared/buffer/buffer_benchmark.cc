// Buffer and LEB128 throughput, with memcpy into a 16 MiB ring measured in the same run for
// scale (docs/benchmarks.md). Run:
//   bazel run -c opt //shared/buffer:buffer_benchmark
#include <pthread.h>
#include <sched.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "shared/buffer/chunked_buffer.h"
#include "shared/buffer/leb128.h"
#include "shared/buffer/local_limit_chunk_manager.h"
#include "shared/buffer/staged_writer.h"

namespace strata {
namespace {

constexpr size_t kRingBytes = 16 << 20;
constexpr size_t kBufferLimit = 16 << 20;
constexpr BufferChunk::Length kChunkBytes = 64 * 1024;

// The floor: copying the same entry into a 16 MiB ring.
void BM_MemcpyRing(benchmark::State& state) {
  const size_t entry_bytes = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> ring(kRingBytes);
  std::vector<uint8_t> entry(entry_bytes, 0x5A);
  size_t offset = 0;
  for (auto _ : state) {
    if (offset + entry_bytes > kRingBytes) offset = 0;
    std::memcpy(ring.data() + offset, entry.data(), entry_bytes);
    benchmark::DoNotOptimize(ring.data() + offset);
    offset += entry_bytes;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * entry_bytes));
}
BENCHMARK(BM_MemcpyRing)->Arg(64)->Arg(1024);

// One shared thread-safe buffer for all threads of a run, as in a session.
struct SharedBuffer {
  LocalLimitChunkManager manager{kBufferLimit, kChunkBytes};
  ChunkedBuffer buffer{ThreadSafety::kThreadSafe, manager};
};
SharedBuffer* g_shared = nullptr;
void SetUpShared(const benchmark::State&) { g_shared = new SharedBuffer; }
void TearDownShared(const benchmark::State&) {
  delete g_shared;
  g_shared = nullptr;
}

// Pins the calling benchmark thread to the (thread_index)-th CPU the process may run on
// (tools/bench.sh runs the multi-writer cases under `taskset -c 0,1`: thread 0 on CPU 0,
// thread 1 on CPU 1), so that one writer and two writers are compared on the same CPUs and
// two writers never share one CPU.
void PinToOwnCpu(const benchmark::State& state) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  int wanted = state.thread_index() % CPU_COUNT(&allowed);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (wanted-- == 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
      return;
    }
  }
}

// ReserveAndPut of raw entries (entry bytes as given; the 1-2 byte size header is extra),
// every writer thread straight into the shared buffer (its lock per entry). Bytes per second
// are all threads' bytes per wall second (real time).
void BM_ReserveAndPut(benchmark::State& state) {
  PinToOwnCpu(state);
  const size_t entry_bytes = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> entry(entry_bytes, 0x5A);
  ChunkedBuffer& buffer = g_shared->buffer;
  for (auto _ : state) {
    buffer.PutFrom(entry.data(), entry_bytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * entry_bytes));
  if (state.thread_index() == 0) {
    state.counters["failed_puts"] = static_cast<double>(buffer.GetState().failed_put_count);
  }
}
BENCHMARK(BM_ReserveAndPut)
    ->Arg(64)
    ->Arg(1024)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime()
    ->Setup(SetUpShared)
    ->Teardown(TearDownShared);

// The same entries through each writer thread's own StagedWriter (16 KiB), which moves them
// into the shared buffer in batches (one lock per batch): how the buffer scales with writers.
void BM_StagedPut(benchmark::State& state) {
  PinToOwnCpu(state);
  const size_t entry_bytes = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> entry(entry_bytes, 0x5A);
  StagedWriter writer(g_shared->buffer);
  for (auto _ : state) {
    writer.PutFrom(entry.data(), entry_bytes);
  }
  writer.Flush();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * entry_bytes));
}
BENCHMARK(BM_StagedPut)
    ->Arg(64)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime()
    ->Setup(SetUpShared)
    ->Teardown(TearDownShared);

// Same, with the sampler-style preparer thread keeping a spare chunk ready.
void BM_ReserveAndPutWithPreparedChunks(benchmark::State& state) {
  const size_t entry_bytes = static_cast<size_t>(state.range(0));
  SharedBuffer shared;
  std::vector<uint8_t> entry(entry_bytes, 0x5A);
  size_t n = 0;
  for (auto _ : state) {
    shared.buffer.PutFrom(entry.data(), entry_bytes);
    if ((++n & 1023) == 0) shared.buffer.PrepareNextChunk();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * entry_bytes));
}
BENCHMARK(BM_ReserveAndPutWithPreparedChunks)->Arg(64)->Arg(1024);

// A typed entry (what a marker looks like): kind byte, time stamp, thread id, short string.
void BM_PutObjectsTyped(benchmark::State& state) {
  SharedBuffer shared;
  const std::string name = "IPC:message";
  const TimeStamp now = TimeStamp::Now();
  for (auto _ : state) {
    shared.buffer.PutObjects(uint8_t{64}, now, ThreadId::FromNumber(1234), name);
  }
}
BENCHMARK(BM_PutObjectsTyped);

// Reading everything back (capture cost), per entry.
void BM_ReadEach(benchmark::State& state) {
  SharedBuffer shared;
  const size_t entry_bytes = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> entry(entry_bytes, 0x5A);
  while (shared.buffer.GetState().cleared_block_count == 0) {
    shared.buffer.PutFrom(entry.data(), entry_bytes);
  }
  size_t entries = 0;
  for (auto _ : state) {
    shared.buffer.ReadEach([&](EntryReader& reader) {
      benchmark::DoNotOptimize(reader.PeekByte());
      ++entries;
    });
  }
  state.SetItemsProcessed(static_cast<int64_t>(entries));
}
BENCHMARK(BM_ReadEach)->Arg(64);

void BM_ULEB128Write(benchmark::State& state) {
  std::vector<uint64_t> values(4096);
  for (size_t i = 0; i < values.size(); ++i) values[i] = (i * 2654435761u) >> (i % 40);
  uint8_t out[16 * 4096];
  for (auto _ : state) {
    uint8_t* p = out;
    for (uint64_t v : values) WriteULEB128(v, p);
    benchmark::DoNotOptimize(p);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * values.size()));
}
BENCHMARK(BM_ULEB128Write);

void BM_ULEB128Read(benchmark::State& state) {
  std::vector<uint64_t> values(4096);
  for (size_t i = 0; i < values.size(); ++i) values[i] = (i * 2654435761u) >> (i % 40);
  std::vector<uint8_t> encoded(16 * values.size());
  uint8_t* end = encoded.data();
  for (uint64_t v : values) WriteULEB128(v, end);
  for (auto _ : state) {
    const uint8_t* p = encoded.data();
    uint64_t sum = 0;
    while (p < end) sum += ReadULEB128<uint64_t>(p);
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * values.size()));
}
BENCHMARK(BM_ULEB128Read);

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
