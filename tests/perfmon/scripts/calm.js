// A well-behaved script: each tick burns 0.5 ms of CPU (the thread CPU clock, cpuTimeMs()).
function calmTick() {
  const start = cpuTimeMs();
  let x = 0;
  while (cpuTimeMs() - start < 0.5) {
    for (let i = 0; i < 1000; i++) x = (x * 31 + i) | 0;
  }
  return x;
}
