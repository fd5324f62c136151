// An independent consumer of `strata convert --to chrome`: the Firefox Profiler front-end's own
// Chrome trace importer (profiler-cli). It refuses a trace with any event lacking a name, and
// pairs each "E" with its "B" into an interval marker.
//
//   node chrome_import_check.js TRACE.json PROFILER_CLI_JS
//
// Prints "chrome_import markers=M intervals=I b_events=B" and exits 0 when the trace loads and
// every B/E slice came back as one interval marker (M == I == B).
'use strict';
const fs = require('fs');
const [trace, cli] = process.argv.slice(2);
const { pqJson, load, pq } = require('../profiler_cli_sync.js')(cli);

const events = JSON.parse(fs.readFileSync(trace, 'utf8')).traceEvents;
const bEvents = events.filter((e) => e.ph === 'B').length;
const loaded = load(trace, 'chrome');
if (!loaded.ok) {
  console.log(`chrome_import FAIL: the front-end refuses the trace: ${loaded.error}`);
  process.exit(1);
}
let markers = 0, intervals = 0;
for (const thread of pqJson(['thread', 'list', '--session', 'chrome']).threads || []) {
  const m = pqJson(['thread', 'markers', '--thread', thread.threadHandle, '--session', 'chrome']);
  markers += m.totalMarkerCount;
  for (const t of m.byType) if (t.isInterval) intervals += t.count;
}
pq(['stop', 'chrome']);
console.log(`chrome_import markers=${markers} intervals=${intervals} b_events=${bEvents}`);
process.exit(markers === bEvents && intervals === bEvents && bEvents > 0 ? 0 : 1);
