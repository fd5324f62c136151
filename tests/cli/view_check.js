// `strata view` as the Firefox Profiler uses it, with real HTTP requests:
//
//   node view_check.js PROFILE_URL SYMBOL_SERVER_URL PROFILE_FILE PROFILER_CLI_JS
//
// 1. The profile URL serves the file's bytes with the CORS headers the page needs; the
//    preflight is answered (Chrome's private-network header too); a wrong token is 404.
// 2. /symbolicate/v5 in the front-end's request format names the profile's addresses
//    (HotLoop, with hot_loop.cc:line); 10 000 addresses in one request; bad JSON is a 400 with
//    an "error"; two clients at once.
// 3. /source/v1 serves the source file symbolication named, and refuses /etc/passwd.
// 4. The front-end's own code (profiler-cli: its import, its symbol-store client and its
//    source fetching) loads the profile from the URL, symbolicates it through the server
//    and shows HotLoop's source.
'use strict';

const fs = require('fs');
const { spawnSync } = require('child_process');

const [profileUrl, symbolServer, profileFile, cli] = process.argv.slice(2);
let failures = 0;
function check(condition, message) {
  console.log(`  ${condition ? 'ok  ' : 'FAIL'} ${message}`);
  if (!condition) failures++;
}

async function post(path, body) {
  const r = await fetch(symbolServer + path, {
    method: 'POST',
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  let json = null;
  try { json = JSON.parse(await r.text()); } catch (e) { /* left null */ }
  return { status: r.status, json, cors: r.headers.get('access-control-allow-origin') };
}

// The profile's native frame addresses, as the front-end sends them: per lib, module offsets.
function jobsFromProfile(profile) {
  const libs = profile.libs;
  const byLib = new Map();
  for (const thread of profile.threads) {
    const strings = thread.stringTable;
    const location = thread.frameTable.schema.location;
    for (const row of thread.frameTable.data) {
      const text = strings[row[location]];
      if (!/^0x[0-9a-f]+$/.test(text)) continue;
      const address = BigInt(text);
      const lib = libs.findIndex((l) => BigInt(l.start) <= address && address < BigInt(l.end));
      if (lib < 0) continue;
      const offset = Number(address - (BigInt(libs[lib].start) - BigInt(libs[lib].offset)));
      if (!byLib.has(lib)) byLib.set(lib, new Set());
      byLib.get(lib).add(offset);
    }
  }
  return [...byLib].map(([lib, offsets]) => ({
    lib: libs[lib],
    offsets: [...offsets],
  }));
}

(async () => {
  // 1. The profile and CORS.
  const text = fs.readFileSync(profileFile, 'utf8');
  const got = await fetch(profileUrl);
  const body = await got.text();
  check(got.status === 200 && body === text, `GET profile: status ${got.status}, ${body.length} bytes (file ${text.length})`);
  check(got.headers.get('access-control-allow-origin') === '*', 'CORS: Access-Control-Allow-Origin *');
  const pre = await fetch(symbolServer + '/symbolicate/v5', {
    method: 'OPTIONS',
    headers: {
      Origin: 'https://profiler.firefox.com',
      'Access-Control-Request-Method': 'POST',
      'Access-Control-Request-Private-Network': 'true',
    },
  });
  check(pre.status === 204 && /POST/.test(pre.headers.get('access-control-allow-methods')) &&
        pre.headers.get('access-control-allow-private-network') === 'true',
        `preflight: ${pre.status}, methods ${pre.headers.get('access-control-allow-methods')}`);
  const wrong = await fetch(profileUrl.replace(/\/[0-9a-f]{32}\//, '/00000000000000000000000000000000/'));
  check(wrong.status === 404, `a wrong token: ${wrong.status}`);

  // 2. symbolicate/v5.
  const profile = JSON.parse(text);
  const jobs = jobsFromProfile(profile);
  check(jobs.length > 0, `the profile has raw addresses in ${jobs.length} libraries`);
  const request = {
    jobs: jobs.map(({ lib, offsets }) => ({
      memoryMap: [[lib.debugName, lib.breakpadId]],
      stacks: [offsets.map((o) => [0, o])],
    })),
  };
  const r = await post('/symbolicate/v5', request);
  check(r.status === 200 && r.json && r.json.results.length === jobs.length, `symbolicate: ${r.status}, ${r.json && r.json.results.length} results`);
  let hot = null;
  for (const [i, result] of (r.json ? r.json.results : []).entries()) {
    const key = `${jobs[i].lib.debugName}/${jobs[i].lib.breakpadId}`;
    check(result.found_modules[key] === true || !fs.existsSync(jobs[i].lib.path), `found_modules ${key}: ${result.found_modules[key]}`);
    for (const frame of result.stacks[0]) {
      if (frame.function && /HotLoop/.test(frame.function)) hot = frame;
    }
  }
  check(hot !== null && /hot_loop\.cc$/.test(hot.file) && hot.line > 0,
        `HotLoop named with file:line: ${hot && `${hot.function} ${hot.file}:${hot.line}`}`);
  const hotJob = jobs.find((j) => j.lib.debugName === 'hot_loop');
  const many = [];
  for (let i = 0; i < 10000; i++) many.push([0, hotJob.offsets[i % hotJob.offsets.length]]);
  const big = await post('/symbolicate/v5', { memoryMap: [[hotJob.lib.debugName, hotJob.lib.breakpadId]], stacks: [many] });
  check(big.status === 200 && big.json.results[0].stacks[0].length === 10000, `10 000 addresses: ${big.status}`);
  const bad = await post('/symbolicate/v5', '{"jobs": [');
  check(bad.status === 400 && bad.json && typeof bad.json.error === 'string', `bad JSON: ${bad.status} ${bad.json && bad.json.error}`);
  const both = await Promise.all([post('/symbolicate/v5', request), post('/symbolicate/v5', request)]);
  check(both.every((b) => b.status === 200 && JSON.stringify(b.json) === JSON.stringify(r.json)), 'two clients at once get the same answer');

  // 3. source/v1.
  if (hot) {
    const source = await post('/source/v1', { debugName: 'hot_loop', debugId: hotJob.lib.breakpadId, moduleOffset: '0x0', file: hot.file });
    check(source.status === 200 && /static void HotLoop/.test(source.json.source), `source of ${hot.file}: ${source.status}`);
  }
  const passwd = await post('/source/v1', { debugName: 'hot_loop', debugId: 'x', moduleOffset: '0x0', file: '/etc/passwd' });
  check(passwd.status === 403 && !/root:/.test(JSON.stringify(passwd.json)), `/etc/passwd refused: ${passwd.status}`);

  // 4. The front-end's own code.
  const env = { ...process.env };
  const pq = (args) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env, maxBuffer: 64 << 20 });
  const load = pq(['load', profileUrl, '--symbol-server', symbolServer, '--session', 'view']);
  let loaded = load.status === 0;
  for (let i = 0; !loaded && i < 150 && /did not become ready/.test(load.stderr); i++) {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    loaded = pq(['status', '--session', 'view']).status === 0;
  }
  check(loaded, `profiler-cli loads the profile from the URL: ${load.stderr.trim()}`);
  if (loaded) {
    let functions = '';
    for (let i = 0; i < 50; i++) {  // Symbolication runs in the background after the load.
      functions = pq(['thread', 'functions', '--session', 'view', '--search', 'HotLoop']).stdout;
      if (/^\s*f-\d+\.\s.*HotLoop/m.test(functions)) break;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
    const line = (functions.match(/^\s*(f-\d+)\.\s.*HotLoop.*$/m) || []);
    check(line.length > 0, `the front-end symbolicated through the server: ${(line[0] || functions.slice(0, 300)).trim()}`);
    const handle = line[1];
    if (handle) {
      const annotate = pq(['function', 'annotate', handle, '--session', 'view', '--mode', 'src', '--context', 'file']);
      const loop = annotate.stdout.split('\n').find((l) => /sink \+= i \* 7/.test(l));
      check(loop !== undefined && /^\s*\d+\s+\d+/.test(loop), `the front-end's source view of HotLoop, with samples on the loop's line: ${loop || annotate.stdout.slice(0, 400) + annotate.stderr.trim()}`);
    } else {
      check(false, `no function handle for HotLoop in: ${functions.slice(0, 300)}`);
    }
    pq(['stop', 'view']);
  }
  console.log(failures === 0 ? 'view_check: all passed' : `view_check: ${failures} failed`);
  process.exit(failures === 0 ? 0 : 1);
})().catch((e) => { console.log(`FAIL ${e.stack}`); process.exit(1); });
