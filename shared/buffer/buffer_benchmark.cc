// Buffer and LEB128 throughput, with memcpy into a 16 MiB ring measured in the same run for
// scale (docs/benchmarks.md). Run:
//   bazel run -c opt //shared/buffer:buffer_benchmark
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "shared/buffer/chunked_buffer.h"
#include "shared/buffer/leb128.h"
#include "shared/buffer/local_limit_chunk_manager.h"
#include "shared/buffer/staging_area.h"

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

// Pins the calling thread to the (index mod N)-th of the N CPUs the process may run on
// (tools/bench.sh runs the multi-writer cases under `taskset -c 0,1`: writer 0 on CPU 0,
// writer 1 on CPU 1), so that one writer and two writers are compared on the same CPUs and
// two writers never share one CPU.
void PinThreadToAllowedCpu(size_t index) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  int wanted = static_cast<int>(index % static_cast<size_t>(CPU_COUNT(&allowed)));
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed) || wanted-- != 0) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
    return;
  }
}

void PinToOwnCpu(const benchmark::State& state) {
  PinThreadToAllowedCpu(static_cast<size_t>(state.thread_index()));
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

// The same entries through each writer thread's own StagingArea (16 KiB), which moves them
// into the shared buffer in batches (one lock per batch): how the buffer scales with writers.
void BM_StagedPut(benchmark::State& state) {
  PinToOwnCpu(state);
  const size_t entry_bytes = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> entry(entry_bytes, 0x5A);
  StagingArea area;
  for (auto _ : state) {
    area.PutFrom(g_shared->buffer, entry.data(), entry_bytes);
  }
  area.FlushInto(g_shared->buffer);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * entry_bytes));
}
BENCHMARK(BM_StagedPut)
    ->Arg(64)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime()
    ->Setup(SetUpShared)
    ->Teardown(TearDownShared);

// The writer-count comparison measured as a whole: each iteration starts `writers` threads,
// each pinned to its own CPU of the allowed set, that each put kEntriesPerWriter entries into
// one shared buffer (directly, or through their own StagingArea when range(1) is 1),
// and the iteration's time is the wall time from before the first start to after the last
// join (manual time). Bytes per second are then all writers' bytes per wall second of the
// whole run, whether or not the writers overlapped: Google Benchmark's own ->Threads(n)
// times each thread from the start barrier to its own end, which overstates the total when
// one writer finishes long before the other.
constexpr size_t kEntriesPerWriter = 200000;  // 12.8 MB of 64-byte entries per writer.

void BM_WritersWall(benchmark::State& state) {
  const size_t writers = static_cast<size_t>(state.range(0));
  const bool staged = state.range(1) != 0;
  constexpr size_t kEntryBytes = 64;
  // Steady state, as in a long session: the buffer has reached its limit once, so writers
  // recycle chunks instead of allocating and first-touching new ones.
  SharedBuffer shared;
  {
    uint8_t entry[kEntryBytes];
    std::memset(entry, 0x5A, sizeof(entry));
    for (size_t i = 0; i < 2 * kBufferLimit / kEntryBytes; ++i) {
      shared.buffer.PutFrom(entry, sizeof(entry));
    }
  }
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (size_t w = 0; w < writers; ++w) {
      threads.emplace_back([&shared, w, staged]() {
        PinThreadToAllowedCpu(w);
        uint8_t entry[kEntryBytes];
        std::memset(entry, 0x5A, sizeof(entry));
        if (staged) {
          StagingArea area;
          for (size_t i = 0; i < kEntriesPerWriter; ++i) {
            area.PutFrom(shared.buffer, entry, sizeof(entry));
          }
          area.FlushInto(shared.buffer);
        } else {
          for (size_t i = 0; i < kEntriesPerWriter; ++i) {
            shared.buffer.PutFrom(entry, sizeof(entry));
          }
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.SetBytesProcessed(
      static_cast<int64_t>(state.iterations() * writers * kEntriesPerWriter * kEntryBytes));
}
// Args: writers, staged (0 = ReserveAndPut under the buffer's lock, 1 = StagingArea).
BENCHMARK(BM_WritersWall)
    ->Args({1, 0})
    ->Args({2, 0})
    ->Args({1, 1})
    ->Args({2, 1})
    ->UseManualTime();

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
