// Synchronous helpers around profiler-cli (the Firefox Profiler front-end's import code, from
// the package tests/frontend installs), shared by the scenario scripts that import profiles:
//
//   const { pq, pqJson, load } = require('./profiler_cli_sync.js')(PROFILER_CLI_JS);
//   const loaded = load(profilePath, sessionName);   // { ok, error }
//   const list = pqJson(['thread', 'list', '--session', sessionName]);
//
// PROFILER_CLI_SESSION_DIR should name a short private directory (socket paths are limited).
//
// Asynchronous callers run the same load in a child process, which prints {ok, error}:
//
//   node profiler_cli_sync.js load PROFILER_CLI_JS PROFILE SESSION
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

  // True while process `pid` exists (signal 0 checks without sending anything).
  function alive(pid) {
    try { process.kill(pid, 0); return true; } catch (e) { return e.code === 'EPERM'; }
  }

  // The tail of the session's daemon log, for a failure message.
  function daemonLog(session) {
    const dir = process.env.PROFILER_CLI_SESSION_DIR;
    if (!dir) return '';
    try {
      const text = require('fs').readFileSync(require('path').join(dir, `${session}.log`), 'utf8');
      return text.trim().split('\n').slice(-8).join(' | ');
    } catch (e) {
      return `(no daemon log: ${e.code})`;
    }
  }

  // Loads a profile into a session. profiler-cli gives its daemon 500 ms to start, which a
  // loaded machine can miss; the daemon keeps loading, so poll its status then. A daemon that
  // is gone without loading (killed beside a thread storm, or it never started) is started
  // again, up to three times; a daemon still running is waited for.
  function load(file, session) {
    let lastError = '';
    for (let attempt = 1; attempt <= 3; attempt++) {
      const r = pq(['load', file, '--session', session]);
      if (r.status === 0) return { ok: true };
      const stillStarting = /did not become ready/.test(r.stderr);
      const exited = /exited during startup|died while loading|failed to start/.test(r.stderr);
      if (!stillStarting && !exited) return { ok: false, error: r.stderr.trim() };
      lastError = r.stderr.trim().split('\n')[0];
      const pidMatch = /running as pid (\d+)/.exec(r.stderr);
      const pid = pidMatch ? Number(pidMatch[1]) : 0;
      // A hang detector, not a timing check: a daemon still starting on a machine at load 40+
      // took over 60 s once (cli_test, beside tools/load.sh and sanitizer builds).
      const deadline = Date.now() + 300000;
      while (stillStarting && Date.now() < deadline) {
        sleep(200);
        const s = pq(['status', '--session', session]);
        if (s.status === 0) return { ok: true };
        if (/Profile load failed/.test(s.stderr)) return { ok: false, error: s.stderr.trim() };
        lastError = s.stderr.trim().split('\n')[0];
        if (pid && !alive(pid)) {
          lastError = `daemon pid ${pid} ended before the profile loaded (${lastError}); ` +
                      `log: ${daemonLog(session)}`;
          break;
        }
      }
      if (stillStarting && Date.now() >= deadline) {
        return { ok: false, error: `timed out waiting for session ${session} (daemon pid ` +
                                   `${pid || '?'}, last status: ${lastError}; log: ` +
                                   `${daemonLog(session)})` };
      }
      pq(['stop', session]);  // clears what the ended daemon left before starting another
    }
    return { ok: false, error: `session ${session} never loaded in 3 attempts: ${lastError}` };
  }

  return { pq, pqJson, load };
};

if (require.main === module) {
  const [verb, cli, file, session] = process.argv.slice(2);
  if (verb !== 'load' || !session) {
    console.error('usage: profiler_cli_sync.js load PROFILER_CLI_JS PROFILE SESSION');
    process.exit(2);
  }
  const result = module.exports(cli).load(file, session);
  console.log(JSON.stringify(result));
  process.exit(result.ok ? 0 : 1);
}
