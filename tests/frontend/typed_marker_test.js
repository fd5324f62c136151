// Whole-system test of typed markers with a MarkerSchema: a program records them through the
// base tier in process and writes ProfilerGetProfile() (typed_marker_profile.cc); our checker
// accepts the profile; the front-end's importer (profiler-cli) finds the marker type's schema
// and shows the four typed fields with their labels and formatted values.
//
//   node typed_marker_test.js TYPED_MARKER_PROFILE GECKO_PROFILE_CHECK PROFILER_CLI_JS WORKDIR
'use strict';

const { execFile } = require('child_process');
const fs = require('fs');
const path = require('path');

const [program, checker, cli, workDir] = process.argv.slice(2);
// tests/profiler_cli_sync.js, beside this folder in the runfiles and in the source tree.
const cliSync = path.join(__dirname, '..', 'profiler_cli_sync.js');
if (!workDir) {
  console.error('usage: typed_marker_test.js TYPED_MARKER_PROFILE GECKO_PROFILE_CHECK CLI WORKDIR');
  process.exit(2);
}

let failures = 0;
function check(condition, message) {
  console.log(`  ${condition ? 'ok  ' : 'FAIL'} ${message}`);
  if (!condition) failures++;
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

const pq = (args) => run(process.execPath, [cli, ...args]);
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

async function main() {
  const started = Date.now();
  const file = path.join(workDir, 'typed_markers.json');
  const session = 'typed';
  try {
    console.log('profile written in process');
    let r = await run(program, [file]);
    check(r.status === 0, `typed_marker_profile wrote ${file} ${r.stderr}`);
    r = await run(checker, [file]);
    check(r.status === 0 && /0 error\(s\), 0 warning\(s\)/.test(r.stdout),
          `our checker: ${r.stdout.trim()}`);

    // What we wrote: MarkerTypeDisplay()'s schema, not the decoy MarkerTypeSchemaJson().
    const profile = JSON.parse(fs.readFileSync(file, 'utf8'));
    const schemas = Object.fromEntries(profile.meta.markerSchema.map((s) => [s.name, s]));
    const http = schemas.HttpRequest || { data: [] };
    equal(http.display, ['marker-chart', 'marker-table', 'timeline-overview'],
          'HttpRequest schema from MarkerTypeDisplay() (display)');
    equal(http.data.map((f) => [f.key, f.label, f.format]),
          [['url', 'URL', 'url'], ['status', 'Status', 'integer'],
           ['duration', 'Duration', 'duration'], ['bytes', 'Size', 'bytes'],
           [undefined, 'Description', undefined]],
          'HttpRequest schema data (Gecko flavour)');
    check(!('fields' in http), 'no "fields" (processed-format name) in the Gecko schema');

    console.log('front-end import');
    const loaded = await load(file, session);
    check(loaded.ok, `profiler-cli loads it ${loaded.error || ''}`);
    if (!loaded.ok) return;

    const list = await pqJson(['thread', 'list', '--session', session]);
    const main = list.threads.find((t) => t.name === 'GeckoMain') || {};
    equal(main.markerCount, 3, 'GeckoMain marker count');
    const thread = main.threadHandle || 't-0';

    const markers = await pqJson(['thread', 'markers', '--thread', thread, '--session', session]);
    const byName = Object.fromEntries(markers.byType.map((t) => [t.markerName, t.topMarkers[0]]));
    const index = byName['GET index'] || {};
    const missing = byName['GET missing'] || {};
    const batch = byName.batch || {};
    // The duration is end - start of two millisecond doubles: compare to within a nanosecond.
    equal([index.label, Math.round((index.duration || 0) * 1e6) / 1e6],
          ['https://example.org/index.html (200, 4,096B)', 12.5],
          'GET index: tableLabel filled from the typed fields, interval duration');
    equal(missing.label, 'https://example.org/missing.png (404, 1.54MB)',
          'GET missing: tableLabel with the bytes format');

    const fields = (m) => (m.fields || []).map((f) => [f.key, f.label, f.value, f.formattedValue]);
    const [indexInfo, missingInfo, batchInfo, search] = await Promise.all([
      pqJson(['marker', 'info', index.handle || 'm-1', '--session', session]),
      pqJson(['marker', 'info', missing.handle || 'm-2', '--session', session]),
      pqJson(['marker', 'info', batch.handle || 'm-3', '--session', session]),
      pqJson(['thread', 'markers', '--thread', thread, '--session', session,
              '--search', 'missing.png']),
    ]);
    equal([indexInfo.markerType, indexInfo.tooltipLabel], ['HttpRequest', 'HTTP 200'],
          'GET index: schema selected by data.type, tooltipLabel');
    equal(fields(indexInfo), [
      ['url', 'URL', 'https://example.org/index.html', 'https://example.org/index.html'],
      ['status', 'Status', 200, '200'],
      ['duration', 'Duration', 12.5, '12.500ms'],
      ['bytes', 'Size', 4096, '4,096B'],
    ], 'GET index: four typed fields, labels and formatted values');
    equal((indexInfo.schema || {}).description, 'One HTTP request of the test program',
          'static "Description" row becomes the schema description');
    equal(fields(missingInfo), [
      ['url', 'URL', 'https://example.org/missing.png', 'https://example.org/missing.png'],
      ['status', 'Status', 404, '404'],
      ['duration', 'Duration', 0.75, '750μs'],
      ['bytes', 'Size', 1536000, '1.54MB'],
    ], 'GET missing: four typed fields, labels and formatted values');
    equal([batchInfo.markerType, fields(batchInfo)],
          ['PlainJson', [['count', 'Count', 1234567, '1,234,567']]],
          'PlainJson: the raw MarkerTypeSchemaJson() path still works');
    equal([search.filteredMarkerCount, search.byType.map((t) => t.markerName)],
          [1, ['GET missing']], 'search finds a marker by its url field');
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
