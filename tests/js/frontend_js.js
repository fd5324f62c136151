// Imports a profile of `strata js` with the Firefox Profiler front-end's own code (the
// profiler-cli package that tools/setup.sh installs into tests/frontend/node_modules) and
// checks that it shows the script's functions as JavaScript: isJS, the script file as their
// resource, their line in the file's source annotation, and the script markers.
//
//   node frontend_js.js PROFILER_CLI_JS PROFILE FILE NAME:LINE[,NAME:LINE...] [MARKER[,...]]
//
// LINE is the line the function starts on (the engine's "name (file:line:column)").
//
// Prints "ok ..." / "FAIL ..." lines; exit status 0 when every check passed.
// PROFILER_CLI_SESSION_DIR should name a short private directory (socket paths are limited).
'use strict';

const [cli, profile, file, functionList, markerList] = process.argv.slice(2);
if (!functionList) {
  console.error('usage: frontend_js.js PROFILER_CLI_JS PROFILE FILE FUNCTIONS [MARKERS]');
  process.exit(2);
}

let failures = 0;
function check(condition, message) {
  console.log(`${condition ? 'ok' : 'FAIL'} frontend: ${message}`);
  if (!condition) failures++;
}

const { pq, pqJson, load } = require(require('path').join(__dirname, '..', 'profiler_cli_sync.js'))(cli);

const session = `js${process.pid}`;
try {
  const loaded = load(profile, session);
  check(loaded.ok, `profiler-cli loads ${profile} ${loaded.error || ''}`);
  if (loaded.ok) {
    const expected = functionList.split(',').map((spec) => {
      const [name, line] = spec.split(':');
      return { name, line: Number(line) };
    });
    const names = expected.map((e) => e.name);
    const list = pqJson(['thread', 'list', '--session', session]);
    // The JS thread: the one whose functions include the first expected function as JS.
    let thread = null;
    let functions = null;
    for (const t of list.threads) {
      const f = pqJson(['thread', 'functions', '--thread', t.threadHandle, '--session', session,
                        '--search', names[0], '--limit', '0']);
      if (f.functions.some((fn) => fn.name === names[0])) {
        thread = t;
        break;
      }
    }
    check(thread !== null, `a thread has the function ${names[0]}`);
    if (thread) {
      functions = pqJson(['thread', 'functions', '--thread', thread.threadHandle, '--session',
                          session, '--limit', '0']).functions;
      for (const { name, line } of expected) {
        const fn = functions.find((f) => f.name === name && (f.library || '').endsWith(file));
        check(fn !== undefined, `${thread.name}: function ${name} from ${file}` +
              (fn ? ` (${fn.totalPercentage.toFixed(1)}% of samples)` : ''));
        if (!fn) continue;
        const info = pqJson(['function', 'info', fn.functionHandle, '--session', session]);
        check(info.isJS === true, `${name} is a JavaScript function (isJS ${info.isJS})`);
        check(info.resource && info.resource.name.endsWith(file),
              `${name}'s resource is the script (${info.resource && info.resource.name})`);
        const annotation = pqJson(['function', 'annotate', fn.functionHandle, '--session', session]);
        const src = annotation.srcAnnotation || {};
        const lines = (src.lines || []).map((l) => l.lineNumber);
        check((src.filename || '').endsWith(file) && lines.includes(line),
              `${name}'s source annotation: file ${src.filename}, lines ${lines[0]}-` +
              `${lines[lines.length - 1]} (the function starts on line ${line})`);
      }
      for (const marker of (markerList ? markerList.split(',') : [])) {
        const m = pqJson(['thread', 'markers', '--thread', thread.threadHandle, '--session',
                          session, '--search', marker]);
        const found = (m.byType || []).some((t) => t.markerName === marker);
        check(found, `marker ${marker} imported`);
      }
    }
  }
} catch (e) {
  check(false, `profiler-cli query failed: ${e.message}`);
} finally {
  pq(['stop', session]);
}
process.exit(failures ? 1 : 0);
