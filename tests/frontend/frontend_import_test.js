// Whole-system format test: profiles written by Strata's writer, imported by the Firefox
// Profiler front-end's own import and processing code (the profiler-cli package, which bundles
// the front-end's profile-logic), plus our checker (tests/format).
//
//   node frontend_import_test.js MAKE_TEST_PROFILE GECKO_PROFILE_CHECK PROFILER_CLI_JS WORKDIR
//
// 1. The realistic profile (tests/format/test_profiles.h): our checker finds nothing; the
//    importer loads it; what profiler-cli reports (threads, processes, samples, CPU time,
//    categories, function names, address-to-library mapping, markers with payload, string
//    fields and backtraces, counter) matches what was written.
// 2. Every broken variant the importer accepts silently: profiler-cli loads (imports and
//    processes) it without any error, while our checker rejects it with the expected code. Variants
//    the importer rejects are checked to fail on both sides. Variants that hang the importer
//    are only given to the checker (in its unit test).
'use strict';

const { execFile } = require('child_process');
const fs = require('fs');
const path = require('path');

const [makeProfile, checker, cli, workDir] = process.argv.slice(2);
// tests/profiler_cli_sync.js, beside this folder in the runfiles and in the source tree.
const cliSync = path.join(__dirname, '..', 'profiler_cli_sync.js');
if (!workDir) {
  console.error('usage: frontend_import_test.js MAKE_TEST_PROFILE GECKO_PROFILE_CHECK CLI WORKDIR');
  process.exit(2);
}

let failures = 0;
function check(condition, message) {
  if (condition) {
    console.log(`  ok   ${message}`);
  } else {
    console.log(`  FAIL ${message}`);
    failures++;
  }
}
function equal(actual, expected, message) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  check(a === e, `${message}: ${a}${a === e ? '' : ` (expected ${e})`}`);
}

function run(command, args) {
  return new Promise((resolve) => {
    execFile(command, args, { encoding: 'utf8', maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      const status = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      resolve({ status, stdout, stderr: stderr || (error && !stdout ? String(error) : '') });
    });
  });
}

// ---- profiler-cli driving -------------------------------------------------------------------

function pq(args) {
  return run(process.execPath, [cli, ...args]);
}

async function pqJson(args) {
  const r = await pq([...args, '--json']);
  if (r.status !== 0) throw new Error(`profiler-cli ${args.join(' ')} failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

// Loads `file` into session `session`: {ok, error}. The one load of tests/profiler_cli_sync.js
// (it waits out a daemon slow to start on a loaded machine and starts a dead one again), run
// in a child process so that loads overlap.
async function load(file, session) {
  const r = await run(process.execPath, [cliSync, 'load', cli, file, session]);
  try {
    return JSON.parse(r.stdout.trim().split('\n').pop());
  } catch (e) {
    return { ok: false, error: `profiler_cli_sync.js load: status ${r.status}: ${r.stderr.trim()}` };
  }
}

function stop(session) {
  return pq(['stop', session]);
}

// Runs `worker(item)` for every item, at most `limit` at a time.
async function pool(items, limit, worker) {
  const queue = items.slice();
  const runners = Array.from({ length: limit }, async () => {
    while (queue.length > 0) await worker(queue.shift());
  });
  await Promise.all(runners);
}

// ---- 1. the realistic profile ---------------------------------------------------------------

async function checkRealisticProfile() {
  console.log('realistic profile');
  const file = path.join(workDir, 'realistic.json');
  let r = await run(makeProfile, [file]);
  check(r.status === 0, `make_test_profile wrote ${file} ${r.stderr}`);
  r = await run(checker, [file]);
  check(r.status === 0 && /: ok: 2 process\(es\), 4 thread\(s\), 48 sample\(s\)/.test(r.stdout) &&
            /0 error\(s\), 0 warning\(s\)/.test(r.stdout),
        `our checker: ${r.stdout.trim()}`);

  const session = 'real';
  const loaded = await load(file, session);
  check(loaded.ok, `profiler-cli loads it ${loaded.error || ''}`);
  if (!loaded.ok) return;
  try {
    // Independent queries, run together (the daemon answers them one by one).
    const [info, list, main, worker, worker2, childSamples, markers] = await Promise.all([
      pqJson(['profile', 'info', '--session', session, '--all']),
      pqJson(['thread', 'list', '--session', session]),
      pqJson(['thread', 'samples', '--thread', 't-0', '--session', session, '--include-idle']),
      pqJson(['thread', 'samples', '--thread', 't-1', '--session', session]),
      pqJson(['thread', 'samples', '--thread', 't-2', '--session', session]),
      pqJson(['thread', 'samples', '--thread', 't-3', '--session', session]),
      pqJson(['thread', 'markers', '--thread', 't-0', '--session', session]),
    ]);
    equal(info.name, 'strata frontend test – Linux x86_64',
          'profile name (meta.product + oscpu)');
    equal(info.threadCount, 4, 'thread count');
    equal(info.processCount, 2, 'process count (parent + sub-process)');
    const [parent, child] = info.processes;
    equal([parent.pid, parent.name, child.pid, child.name],
          ['1000', 'strata-demo', '2000', 'strata-child'], 'processes');
    equal(child.startTime, 5, 'sub-process start shifted by its meta.startTime (ms)');
    // threadCPUDelta in ns, first sample ignored: 15 x 0.9 ms + 0.01 ms x (1+...+15) = 14.7.
    equal(parent.threads.map((t) => [t.name, t.tid, t.cpuMs]),
          [['GeckoMain', 1000, 14.7], ['Worker 1', 1001, 14], ['Worker 2', 1002, 7]],
          'parent threads: name, tid, CPU ms from threadCPUDelta');
    equal(child.threads.map((t) => [t.name, t.tid, t.cpuMs]), [['GeckoMain', 2000, 2]],
          'child thread');
    const counter = (parent.counters || [])[0] || {};
    equal([counter.name, counter.category, counter.graphType, counter.mainThreadName],
          ['malloc', 'Memory', 'line-accumulated', 'GeckoMain'],
          'Memory counter attached to GeckoMain');
    equal(info.context.rootRange, { start: 0, end: 25 }, 'root range from profilingStart/EndTime');

    equal(list.threads.map((t) => [t.threadHandle, t.name, t.markerCount]),
          [['t-0', 'GeckoMain', 3], ['t-1', 'Worker 1', 1], ['t-2', 'Worker 2', 1],
           ['t-3', 'GeckoMain', 0]],
          'thread list with marker counts (start/end pair merged)');

    equal(main.categoryBreakdown.totalSamples, 20, 'GeckoMain sample count');
    equal(main.categoryBreakdown.categories.map((c) => [c.name, c.samples,
                                                         c.subcategories.map((s) => s.name)]),
          [['Compute', 10, ['Math']], ['I/O', 6, ['Read']], ['Idle', 4, []]],
          'categories (address frames inherit I/O/Read from their label)');
    const functions = Object.fromEntries(
        main.topFunctionsByTotal.map((f) => [f.nameWithLibrary, [f.totalSamples, f.selfSamples]]));
    equal(functions, {
      'main': [20, 0],
      'strata-demo!Foo::compute(int)': [10, 0],
      'strata-demo!Foo::inner()': [10, 10],
      'Startup::LoadConfig': [6, 0],
      'strata-demo!0x555500001230': [6, 0],
      'libc.so.6!0x7f0000012345': [6, 6],
      'EventLoop::Wait': [4, 4],
    }, 'GeckoMain functions: labels, "name (in lib)" natives, addresses mapped to their libs');

    equal(worker.categoryBreakdown.totalSamples, 15, 'Worker 1 sample count');
    equal(worker.topFunctionsByTotal.map((f) => f.nameWithLibrary).sort(),
          ['Worker::ThreadMain', 'strata-demo!0x555500004567',
           'strata-demo!Work::multiply(double*, int)', 'strata-demo!Work::run()'],
          'Worker 1 function names');
    equal(worker2.categoryBreakdown.totalSamples, 8, 'Worker 2 sample count');
    equal(childSamples.categoryBreakdown.totalSamples, 5, 'child GeckoMain sample count');
    equal(childSamples.topFunctionsByTotal[0].name, 'ChildMain', 'child root function');

    equal(markers.totalMarkerCount, 3, 'GeckoMain marker count');
    const byName = Object.fromEntries(markers.byType.map((t) => [t.markerName, t]));
    const read = (byName.ReadConfig || { topMarkers: [{}] }).topMarkers[0];
    equal([read.label, read.start, read.duration, read.hasStack],
          ['read /etc/strata-demo.ini', 1.25, 5.5, true],
          'ReadConfig: tableLabel from payload (unique-string resolved), times, backtrace');
    equal((byName.Frame || { topMarkers: [{}] }).topMarkers[0].duration, 8.5,
          'Frame: IntervalStart/IntervalEnd paired');
    equal(Object.keys(byName).sort(), ['Frame', 'ReadConfig', 'Startup'], 'marker names');

    const marker = await pqJson(['marker', 'info', read.handle || 'm-2', '--session', session]);
    equal(marker.markerType, 'FileRead', 'payload type selects the FileRead schema');
    equal(marker.fields.map((f) => [f.key, f.formattedValue]),
          [['path', '/etc/strata-demo.ini'], ['bytes', '4,096B'], ['operation', 'read']],
          'payload fields formatted by the schema');
    equal(marker.stack && marker.stack.frames.map((f) => f.name),
          ['Startup::LoadConfig', 'main'], 'marker backtrace from the owning stack table');
  } catch (e) {
    check(false, `profiler-cli query failed: ${e.message}`);
  } finally {
    await stop(session);
  }
}

// ---- 2. broken variants ---------------------------------------------------------------------

async function checkBrokenVariants() {
  console.log('broken variants');
  const listing = await run(makeProfile, ['--list']);
  const variants = listing.stdout.trim().split('\n').map((line) => {
    const [name, code, silent, hangs] = line.split(' ');
    return { name, code, silent: silent === 'silent', hangs: hangs === 'hangs' };
  });
  check(variants.filter((v) => v.silent).length >= 8, `${variants.length} variants listed`);
  // Three at a time: most of the wall time is node start-up and the CLI's polling.
  await pool(variants, 3, async (v) => {
    const file = path.join(workDir, `variant-${v.name}.json`);
    await run(makeProfile, [`--variant=${v.name}`, file]);
    const c = await run(checker, ['--max-per-code=3', file]);
    check(c.status === 1 && c.stdout.includes(`[${v.code}]`),
          `${v.name}: our checker rejects it [${v.code}]`);
    if (v.hangs) {
      console.log(`  skip ${v.name}: the importer never finishes on it (not run)`);
      return;
    }
    // Loading runs the front-end's whole import and processing; sessions are stopped
    // together at the end (one client start instead of one per variant).
    const session = `v${variants.indexOf(v)}`;
    const loaded = await load(file, session);
    if (v.silent) {
      check(loaded.ok, `${v.name}: the importer accepts it silently ${loaded.error || ''}`);
    } else {
      check(!loaded.ok, `${v.name}: the importer rejects it too: ` +
                            `${(loaded.error || 'loaded!').split('\n')[0]}`);
    }
  });
}

async function main() {
  const started = Date.now();
  try {
    await checkRealisticProfile();
    await checkBrokenVariants();
  } catch (e) {
    check(false, `unexpected exception: ${e.stack || e}`);
  } finally {
    await pq(['stop', '--all']);
  }
  console.log(`${failures === 0 ? 'PASS' : 'FAIL'}: ${failures} failure(s), ` +
              `${((Date.now() - started) / 1000).toFixed(1)} s`);
  process.exit(failures === 0 ? 0 : 1);
}

main();
