// Checks on the files the `strata` command writes, for tests/cli/cli_test.sh. Prints
// `key=value` lines; exit status 1 when a file is malformed.
//
//   node cli_checks.js processes PROFILE
//       "process pid=P name=N type=Y threads=T samples=S start_offset_ms=O" per process (the parent
//       first), then "total processes=P threads=T samples=S hex_frames=H".
//   node cli_checks.js share PROFILE FUNCTION...
//       "share pid=P function=F count=K samples=N pct=Q": CPU samples of process P (those whose
//       threadCPUDelta is not 0: not a blocked thread's wait samples or copies) whose stack
//       has a native frame of function F ("F (in lib)...", or exactly F).
//   node cli_checks.js frames PROFILE FUNCTION
//       "frame pid=P location=L line=N parent=PL" for each distinct frame of FUNCTION used by a
//       stack (spaces in values as '_').
//   node cli_checks.js chrome TRACE.json
//       parses the trace, checks that B/E slices balance per thread and nest, prints
//       "chrome events=E process_names=... thread_names=T slices=S async_begin=B async_end=E instants=I"
//       and "chrome_slice name=F count=K" per slice name.
//   node cli_checks.js collapsed FILE
//       "collapsed lines=L total=N" (the counts' sum); fails on a malformed line.
'use strict';

const fs = require('fs');
const zlib = require('zlib');

function readJson(path) {
  let data = fs.readFileSync(path);
  if (data[0] === 0x1f && data[1] === 0x8b) data = zlib.gunzipSync(data);
  return JSON.parse(data.toString('utf8'));
}

function processesOf(profile) {
  const list = [profile];
  for (const p of profile.processes || []) list.push(...processesOf(p));
  return list;
}

const clean = (s) => String(s).replace(/\s/g, '_');

// Per thread: for each sample, the set of location strings on its stack.
function stackLocations(thread) {
  const loc = thread.frameTable.schema.location;
  const prefix = thread.stackTable.schema.prefix;
  const frame = thread.stackTable.schema.frame;
  const cache = new Map();
  return (stack) => {
    if (stack === null || stack === undefined) return [];
    if (cache.has(stack)) return cache.get(stack);
    const out = [];
    for (let s = stack; s !== null && s !== undefined; s = thread.stackTable.data[s][prefix]) {
      out.push(thread.stringTable[thread.frameTable.data[thread.stackTable.data[s][frame]][loc]]);
    }
    cache.set(stack, out);
    return out;
  };
}

function matchesFunction(location, fn) {
  return location === fn || location.startsWith(fn + ' (in ') || location.startsWith(fn + '(');
}

function pidOf(p) {
  return p.threads.length ? p.threads[0].pid : 'none';
}

const [command, file, ...args] = process.argv.slice(2);
let failures = 0;
const fail = (message) => { console.log('FAIL: ' + message); failures++; };

if (command === 'processes') {
  const profile = readJson(file);
  let threads = 0, samples = 0, hex = 0;
  for (const p of processesOf(profile)) {
    let s = 0;
    for (const t of p.threads) {
      s += t.samples.data.length;
      const locations = stackLocations(t);
      const stackCol = t.samples.schema.stack;
      for (const row of t.samples.data) hex += locations(row[stackCol]).filter((l) => l.startsWith('0x')).length;
    }
    threads += p.threads.length;
    samples += s;
    const name = p.threads.length ? p.threads[0].processName : '';
    const type = p.threads.length ? p.threads[0].processType : '';
    console.log(`process pid=${pidOf(p)} name=${clean(name)} type=${type} threads=${p.threads.length} samples=${s} ` +
                `start_offset_ms=${(p.meta.startTime - profile.meta.startTime).toFixed(3)}`);
  }
  console.log(`total processes=${processesOf(profile).length} threads=${threads} samples=${samples} hex_frames=${hex}`);
} else if (command === 'share') {
  const profile = readJson(file);
  for (const p of processesOf(profile)) {
    for (const fn of args) {
      let count = 0, total = 0;
      for (const t of p.threads) {
        const locations = stackLocations(t);
        const stackCol = t.samples.schema.stack;
        const cpuCol = t.samples.schema.threadCPUDelta;
        for (const row of t.samples.data) {
          // CPU samples only: a blocked thread's samples (wait stacks, copies) carry 0.
          if (cpuCol !== undefined && row[cpuCol] === 0) continue;
          total++;
          if (locations(row[stackCol]).some((l) => matchesFunction(l, fn))) count++;
        }
      }
      console.log(`share pid=${pidOf(p)} function=${fn} count=${count} samples=${total} ` +
                  `pct=${total ? (100 * count / total).toFixed(1) : 0}`);
    }
  }
} else if (command === 'frames') {
  const profile = readJson(file);
  const fn = args[0];
  for (const p of processesOf(profile)) {
    for (const t of p.threads) {
      const loc = t.frameTable.schema.location, line = t.frameTable.schema.line;
      const prefix = t.stackTable.schema.prefix, frame = t.stackTable.schema.frame;
      const seen = new Set();
      for (const row of t.stackTable.data) {
        const f = t.frameTable.data[row[frame]];
        const location = t.stringTable[f[loc]];
        if (!matchesFunction(location, fn)) continue;
        const parentStack = row[prefix];
        const parent = parentStack === null ? '' :
            t.stringTable[t.frameTable.data[t.stackTable.data[parentStack][frame]][loc]];
        const key = location + '|' + parent;
        if (seen.has(key)) continue;
        seen.add(key);
        console.log(`frame pid=${t.pid} location=${clean(location)} line=${f[line]} parent=${clean(parent)}`);
      }
    }
  }
} else if (command === 'chrome') {
  const trace = readJson(file);
  if (!Array.isArray(trace.traceEvents)) fail('no traceEvents array');
  const open = new Map();
  const counts = { B: 0, E: 0, b: 0, e: 0, i: 0, M: 0 };
  const processNames = [], threadNames = [];
  const sliceNames = new Map();
  for (const e of trace.traceEvents || []) {
    counts[e.ph] = (counts[e.ph] || 0) + 1;
    const key = e.pid + '/' + e.tid;
    if (e.ph === 'M' && e.name === 'process_name') processNames.push(clean(e.args.name));
    if (e.ph === 'M' && e.name === 'thread_name') threadNames.push(clean(e.args.name));
    if (e.ph === 'B') {
      if (!open.has(key)) open.set(key, []);
      open.get(key).push(e);
      sliceNames.set(e.name, (sliceNames.get(e.name) || 0) + 1);
      if (typeof e.ts !== 'number' || typeof e.name !== 'string') fail('B event without ts or name');
    }
    if (e.ph === 'E') {
      const stack = open.get(key) || [];
      const begin = stack.pop();
      if (!begin) fail(`E without B on ${key} at ${e.ts}`);
      else if (e.ts < begin.ts) fail(`slice ${begin.name} on ${key} ends before it begins`);
    }
  }
  for (const [key, stack] of open) if (stack.length) fail(`${stack.length} slice(s) left open on ${key}`);
  if (counts.b !== counts.e) fail(`async begins ${counts.b} != ends ${counts.e}`);
  console.log(`chrome events=${(trace.traceEvents || []).length} process_names=${processNames.join(',')} ` +
              `thread_names=${threadNames.length} slices=${counts.B} async_begin=${counts.b} ` +
              `async_end=${counts.e} instants=${counts.i}`);
  for (const [name, count] of sliceNames) console.log(`chrome_slice name=${clean(name)} count=${count}`);
} else if (command === 'collapsed') {
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.length);
  let total = 0;
  for (const line of lines) {
    const m = /^(.+) (\d+)$/.exec(line);
    if (!m || m[1].split(';').some((f) => f.length === 0)) { fail(`malformed line: ${line}`); continue; }
    total += Number(m[2]);
  }
  console.log(`collapsed lines=${lines.length} total=${total}`);
} else {
  console.error('usage: cli_checks.js processes|share|frames|chrome|collapsed FILE [ARGS...]');
  process.exit(2);
}
process.exit(failures ? 1 : 0);
