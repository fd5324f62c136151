// A daemon-like program (no Strata include): it closes every descriptor above stderr with
// close_range(3, ~0U, 0), as daemons and supervisors do, reopens its own files on the freed
// numbers and works with them while busy threads (started after that) run:
//
//   - the input file, opened read-only and read fully in small chunks,
//   - the output file, opened write-only, one write per chunk (a transformed copy),
//   - two journal files OUTPUT.journal1 and OUTPUT.journal2, write-only, the chunk's number
//     written to one of them in turn.
//
// ORDER says which numbers they get: `input-first` (input 3, output 4, journals 5 and 6) or
// `output-first` (output 3, journal1 4, input 5, journal2 6). Numbers 3 to 6 are where a
// profiler loaded at start-up is likely to have put descriptors of its own (libunwind 1.6.2
// put its memory-check pipe on 3-4, or 5-6 under `strata record`): whatever it still does
// with those numbers hits the program's files, a read end becoming the input or a
// write-only file. The busy work runs in code without unwind information
// (spin_without_unwind_info.h), where libunwind falls back to validating every read.
//
// Prints one line: "descriptor_daemon: fds=IN,OUT,J1,J2 read_bytes=N chunks=C failed_reads=R
// failed_writes=W checksum=X" and exits 0 when every read and write succeeded and the input
// was read to its end with the expected size, else 3. The output file must be byte-identical
// from run to run, and so must the journals.
//
// Usage: descriptor_daemon INPUT OUTPUT input-first|output-first [INPUT_SIZE]
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/host_safety/descriptors/spin_without_unwind_info.h"

enum { kChunkBytes = 64, kBusyThreads = 2 };

static atomic_int g_stop;

static void* BusyThread(void* unused) {
  (void)unused;
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) spin_without_unwind_info(200000);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4 || (strcmp(argv[3], "input-first") != 0 && strcmp(argv[3], "output-first") != 0)) {
    fprintf(stderr, "usage: %s INPUT OUTPUT input-first|output-first [INPUT_SIZE]\n", argv[0]);
    return 2;
  }
  const long expected_size = argc > 4 ? atol(argv[4]) : -1;
  spin_without_unwind_info(50000000);  // Some CPU time first: the main thread gets sampled.

  // Daemon start-up: nothing above stderr is ours to keep.
  if (close_range(3, ~0U, 0) != 0) {
    perror("close_range");
    return 2;
  }
  // Four descriptors on the lowest freed numbers, in the order ORDER says.
  char journal_paths[2][4096];
  snprintf(journal_paths[0], sizeof journal_paths[0], "%s.journal1", argv[2]);
  snprintf(journal_paths[1], sizeof journal_paths[1], "%s.journal2", argv[2]);
  const int input_first = strcmp(argv[3], "input-first") == 0;
  int input = -1;
  int output = -1;
  int journals[2] = {-1, -1};
  const int kWrite = O_WRONLY | O_CREAT | O_TRUNC;
  if (input_first) {  // input, output, journal 1, journal 2
    input = open(argv[1], O_RDONLY);
    output = open(argv[2], kWrite, 0644);
    journals[0] = open(journal_paths[0], kWrite, 0644);
    journals[1] = open(journal_paths[1], kWrite, 0644);
  } else {  // output, journal 1, input, journal 2
    output = open(argv[2], kWrite, 0644);
    journals[0] = open(journal_paths[0], kWrite, 0644);
    input = open(argv[1], O_RDONLY);
    journals[1] = open(journal_paths[1], kWrite, 0644);
  }
  if (input < 0 || output < 0 || journals[0] < 0 || journals[1] < 0) {
    perror("open");
    return 2;
  }

  // Workers start once the daemon is set up (each new thread is registered by a profiler).
  pthread_t threads[kBusyThreads];
  for (int i = 0; i < kBusyThreads; ++i) pthread_create(&threads[i], NULL, BusyThread, NULL);

  long read_bytes = 0;
  long chunks = 0;
  long failed_reads = 0;
  long failed_writes = 0;
  unsigned long checksum = 1469598103934665603UL;
  char chunk[kChunkBytes];
  for (;;) {
    spin_without_unwind_info(100000);  // Work between reads: samples land here.
    const ssize_t n = read(input, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      ++failed_reads;
      if (failed_reads > 100) break;
      continue;
    }
    if (n == 0) break;
    read_bytes += n;
    ++chunks;
    char line[2 * kChunkBytes + 32];
    int length = snprintf(line, sizeof line, "%06ld ", chunks);
    for (ssize_t i = 0; i < n; ++i) {
      checksum = (checksum ^ (unsigned char)chunk[i]) * 1099511628211UL;
      const char c = chunk[i];
      line[length++] = (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : (c == '\n' ? '|' : c);
    }
    line[length++] = '\n';
    spin_without_unwind_info(100000);
    if (write(output, line, (size_t)length) != length) ++failed_writes;
    // The journals get the line number only.
    if (write(journals[chunks % 2], line, 7) != 7) ++failed_writes;
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < kBusyThreads; ++i) pthread_join(threads[i], NULL);
  if (close(output) != 0) ++failed_writes;
  for (int i = 0; i < 2; ++i) {
    if (close(journals[i]) != 0) ++failed_writes;
  }
  close(input);
  printf("descriptor_daemon: fds=%d,%d,%d,%d read_bytes=%ld chunks=%ld failed_reads=%ld "
         "failed_writes=%ld checksum=%016lx\n",
         input, output, journals[0], journals[1], read_bytes, chunks, failed_reads, failed_writes, checksum);
  const int ok = failed_reads == 0 && failed_writes == 0 &&
                 (expected_size < 0 || read_bytes == expected_size);
  return ok ? 0 : 3;
}
