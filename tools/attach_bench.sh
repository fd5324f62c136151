#!/usr/bin/env bash
# Attach cost (issue 36, docs/attach.md, docs/benchmarks.md "Attach"): ROUNDS attaches of
# `strata record -p PID --duration 0.05` to tests/attach/echo_server --waiters (6 threads: the
# main one in accept, read, epoll_wait and pthread_cond_wait waiters, a spinner), each line
# strata prints parsed for:
#   list      listing the threads' pointers (one short ptrace stop per thread)
#   stop      the longest of those per-thread stops, from PTRACE_INTERRUPT to PTRACE_DETACH
#             (a thread asked to stop has to be scheduled first: an upper bound)
#   borrowed  the borrowed thread's whole stop, from PTRACE_INTERRUPT to PTRACE_DETACH (code
#             page, dlopen, strata_attach_start, restore: docs/attach.md): the pause of one
#             program thread; the others run on
#   held      the same from the stop's report (waitpid) to PTRACE_DETACH
#   load      of it, the trampoline's round trip (mmap of the stack, dlopen, start, munmap)
#   sampling  from strata's start to the session running in the process (every thread's
#             sampling source armed; the first sample follows within one interval of CPU)
# Medians and maxima; the first attach (dlopen loads the library) apart from the rest (already
# loaded: dlopen only takes a reference).
#   tools/attach_bench.sh [ROUNDS]      (default 30; builds with -c opt)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-30}"
bazel build -c opt //tools/strata:strata //base:libstrata_base.so //tests/attach:echo_server >&2
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
work="$(mktemp -d /tmp/strata-attach-bench.XXXXXX)"
"$bin/tests/attach/echo_server" --waiters >"$work/server" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
sleep 0.5
for ((i = 1; i <= rounds; i++)); do
  "$bin/tools/strata/strata" record -p "$server" --duration 0.05 -o "$work/p.json" 2>&1 |
    sed -n 's/.*listed in \([0-9.]*\) ms, longest stop \([0-9.]*\) ms); borrowed thread [0-9]* after [0-9.]* ms, stopped \([0-9.]*\) ms; loaded [0-9.]* ms and sampling \([0-9.]*\) ms after the command (the borrowed thread.s stop: \([0-9.]*\) ms from its report; prepare [0-9.]* + load \([0-9.]*\) .*/\1 \2 \3 \5 \6 \4/p' >>"$work/rounds"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
echo "first attach (library loaded): $(head -1 "$work/rounds" | awk '{ printf "list %s ms, stop %s ms, borrowed %s ms (held %s, load %s), sampling %s ms", $1, $2, $3, $4, $5, $6 }')"
tail -n +2 "$work/rounds" | awk -v n="$((rounds - 1))" '
  { for (k = 1; k <= 6; k++) { v[k, NR] = $k; if ($k > max[k]) max[k] = $k } }
  END {
    split("list stop borrowed held load sampling", name, " ")
    for (k = 1; k <= 6; k++) {
      m = 0; for (i = 1; i <= NR; i++) a[i] = v[k, i]
      for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      med = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
      printf "later attaches (%d): %s median %.3f ms, max %.3f ms\n", NR, name[k], med, max[k]
    }
  }'
