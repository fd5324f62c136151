// Imports one Strata profile with the Firefox Profiler front-end's own code (profiler-cli, the
// package tests/frontend installs; see tests/frontend/frontend_import_test.js for the format
// test itself) and checks that every thread came through: its name, its sample count, and
// optionally a function that must be among its functions.
//
//   node frontend_threads.js PROFILER_CLI_JS PROFILE THREAD_COUNT NAME=SAMPLES[:FUNCTION]...
//
// THREAD_COUNT is the number of threads in the file (all must be imported). Prints "ok ..." /
// "FAIL ..." lines and "frontend: N thread(s) imported"; exit status 0 when all checks pass.
// PROFILER_CLI_SESSION_DIR should name a short private directory (socket paths are limited).
'use strict';

const [cli, profile, threadCount, ...expected] = process.argv.slice(2);
if (!threadCount) {
  console.error('usage: frontend_threads.js PROFILER_CLI_JS PROFILE THREAD_COUNT NAME=SAMPLES[:FUNCTION]...');
  process.exit(2);
}

let failures = 0;
function check(condition, message) {
  console.log(`${condition ? 'ok' : 'FAIL'} frontend: ${message}`);
  if (!condition) failures++;
}

const { pq, pqJson, load } = require(require('path').join(__dirname, 'profiler_cli_sync.js'))(cli);

const session = `s${process.pid}`;
try {
  const loaded = load(profile, session);
  check(loaded.ok, `profiler-cli loads ${profile} ${loaded.error || ''}`);
  if (loaded.ok) {
    const list = pqJson(['thread', 'list', '--session', session]);
    check(list.totalThreadCount === Number(threadCount),
          `${list.totalThreadCount} thread(s) imported, ${threadCount} in the file`);
    const byName = new Map();
    for (const t of list.threads) {
      if (!byName.has(t.name)) byName.set(t.name, []);
      byName.get(t.name).push(t);
    }
    for (const spec of expected) {
      const [, name, samples, func] = /^([^=]+)=(\d+)(?::(.*))?$/.exec(spec) || [];
      if (!name) throw new Error(`bad expectation ${spec}`);
      const threads = byName.get(name) || [];
      check(threads.length === 1, `thread '${name}' imported (${threads.length} found)`);
      if (threads.length !== 1) continue;
      const s = pqJson(['thread', 'samples', '--thread', threads[0].threadHandle, '--session',
                        session, '--include-idle']);
      check(s.categoryBreakdown.totalSamples === Number(samples),
            `'${name}' has ${s.categoryBreakdown.totalSamples} samples (file: ${samples})`);
      if (func) {
        const names = (s.topFunctionsByTotal || []).map((f) => f.nameWithLibrary || f.name);
        check(names.some((n) => n.includes(func)),
              `'${name}' has function ${func} (top: ${names.slice(0, 8).join(' | ')})`);
      }
    }
    console.log(`frontend: ${list.totalThreadCount} thread(s) imported`);
  }
} catch (e) {
  check(false, `profiler-cli query failed: ${e.message}`);
} finally {
  pq(['stop', session]);
}
process.exit(failures === 0 ? 0 : 1);
