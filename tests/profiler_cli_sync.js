// Synchronous helpers around profiler-cli (the Firefox Profiler front-end's import code, from
// the package tests/frontend installs), shared by the scenario scripts that import profiles:
//
//   const { pq, pqJson, load } = require('./profiler_cli_sync.js')(PROFILER_CLI_JS);
//   const loaded = load(profilePath, sessionName);   // { ok, error }
//   const list = pqJson(['thread', 'list', '--session', sessionName]);
//
// PROFILER_CLI_SESSION_DIR should name a short private directory (socket paths are limited).
'use strict';

const { spawnSync } = require('child_process');

const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

module.exports = function profilerCli(cli) {
  // One profiler-cli command; its result (status, stdout, stderr).
  function pq(args) {
    const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', maxBuffer: 64 << 20 });
    if (r.error) throw r.error;
    return r;
  }

  // One command with --json, parsed; throws with profiler-cli's message on failure.
  function pqJson(args) {
    const r = pq([...args, '--json']);
    if (r.status !== 0) throw new Error(`profiler-cli ${args.join(' ')}: ${r.stderr.trim()}`);
    return JSON.parse(r.stdout);
  }

  // Loads a profile into a session. profiler-cli gives its daemon 500 ms to start, which a
  // loaded machine can miss; the daemon keeps loading, so poll its status then.
  function load(file, session) {
    const r = pq(['load', file, '--session', session]);
    if (r.status === 0) return { ok: true };
    if (!/did not become ready/.test(r.stderr)) return { ok: false, error: r.stderr.trim() };
    // A hang detector, not a timing check: a daemon still starting on a machine at load 40+
    // took over 60 s once (cli_test, beside tools/load.sh and sanitizer builds).
    const deadline = Date.now() + 300000;
    while (Date.now() < deadline) {
      sleep(200);
      const s = pq(['status', '--session', session]);
      if (s.status === 0) return { ok: true };
      if (/Profile load failed/.test(s.stderr)) return { ok: false, error: s.stderr.trim() };
    }
    return { ok: false, error: `timed out waiting for session ${session}` };
  }

  return { pq, pqJson, load };
};
