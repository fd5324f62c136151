// CPU-bound JavaScript for //tests/symbols:jit_perf_map_test: its functions are compiled by
// V8's JIT, whose code only the perf map (`node --perf-basic-prof`) names.
function fibonacciWork(n) { return n < 2 ? n : fibonacciWork(n - 1) + fibonacciWork(n - 2); }
function hotLoop(cpuMs) {
  let sum = 0;
  const end = process.cpuUsage().user + cpuMs * 1000;
  while (process.cpuUsage().user < end) sum += fibonacciWork(18);
  return sum;
}
console.log("jit_script: " + (hotLoop(Number(process.argv[2] || 800)) > 0));
