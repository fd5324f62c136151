// Script markers round trip: each form of the Strata object once, with known names and texts.
function work(ms) {
  const end = Date.now() + ms;
  let s = 0;
  while (Date.now() < end) s += Math.sin(s + 1);
  return s;
}

Strata.marker("instant-plain");
Strata.marker("instant-text", "hello from JS");
Strata.markerStart("phase");
work(50);
Strata.markerEnd("phase", "phase done");
const t0 = Strata.now();
work(50);
Strata.interval("interval", t0, "interval text");

let threw = false;
try {
  Strata.marker();
} catch (e) {
  threw = true;
}
if (!threw) throw new Error("Strata.marker() without a name must throw");
if (typeof Strata.now() !== "number" || !Strata.isActive()) throw new Error("Strata.now/isActive");
print("markers.js: done");
