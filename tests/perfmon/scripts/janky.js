// A janky script: each tick burns 20 ms of CPU (the thread CPU clock, cpuTimeMs()).
function jankyTick() {
  const start = cpuTimeMs();
  let x = 0;
  while (cpuTimeMs() - start < 20) {
    for (let i = 0; i < 1000; i++) x = (x * 31 + i) | 0;
  }
  return x;
}
