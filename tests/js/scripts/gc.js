// Garbage collection and compilation under sampling: allocation-heavy code (minor and major
// GCs), many small functions compiled at run time, and a hot loop in between.
const DURATION_MS = 2500;

function makeGarbage(n) {
  const keep = [];
  for (let i = 0; i < n; i++) {
    const o = { index: i, text: "item " + i, list: [i, i + 1, i + 2] };
    if (i % 100 === 0) keep.push(o);
  }
  return keep.length;
}

function compileMany(k, salt) {
  let s = 0;
  for (let i = 0; i < k; i++) {
    const f = new Function("x", "return x * " + (i + salt) + " + " + (i * 7) + ";");
    for (let j = 0; j < 300; j++) s += f(j);
  }
  return s;
}

function spin(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s += Math.sqrt(i);
  return s;
}

Strata.markerStart("run");
const start = Date.now();
let rounds = 0;
let sink = 0;
while (Date.now() - start < DURATION_MS) {
  sink += makeGarbage(50000);
  sink += compileMany(40, rounds);
  sink += spin(200000);
  rounds++;
}
Strata.markerEnd("run", "rounds=" + rounds);
print("gc.js: rounds=" + rounds + " sink=" + (sink > 0));
