// Issue 5's test script: a calls b, b loops. Runs for DURATION_MS whatever the JIT mode, the
// run framed by a "run" interval marker (the window the checks count samples in).
const DURATION_MS = 2500;

function b(n) {
  let s = 0;
  for (let i = 0; i < n; i++) {
    s += i % 7;
  }
  return s;
}

function a() {
  return b(1000000) + 1;
}

Strata.markerStart("run");
const start = Date.now();
let total = 0;
let calls = 0;
while (Date.now() - start < DURATION_MS) {
  total += a();
  calls++;
}
Strata.markerEnd("run", "calls=" + calls);
print("nested.js: calls=" + calls + " total=" + total);
