// The Firefox Profiler's own importer (profiler-cli) on a native allocation profile:
//   node alloc_frontend_check.js PROFILE TRUTH PROFILER_CLI_JS
// TRUTH holds the program's "truth FUNCTION allocated=N retained=M" lines. On the main thread
// (where the records are, as Firefox writes them): the strategy native-allocations gives each
// function a total within 5 % of its true allocated bytes; native-retained-allocations gives
// the leaking function its retained bytes within 5 % and the others at most 1 % of that.
'use strict';

const { execFile } = require('child_process');
const fs = require('fs');

const [file, truthFile, cli] = process.argv.slice(2);
let failures = 0;
function check(condition, message) {
  console.log(`${condition ? 'ok  ' : 'FAIL'} ${message}`);
  if (!condition) failures++;
}
function run(args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [cli, ...args], { encoding: 'utf8', maxBuffer: 64 << 20 },
             (error, stdout, stderr) => resolve({ status: error ? 1 : 0, stdout, stderr }));
  });
}
async function json(args) {
  const r = await run([...args, '--json', '--session', 'alloc']);
  if (r.status !== 0) throw new Error(`profiler-cli ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// As tests/frontend: the daemon may miss the 500 ms start-up window on a loaded machine.
async function load() {
  const r = await run(['load', file, '--session', 'alloc']);
  if (r.status === 0) return true;
  // A hang detector, not a timing check: a daemon still starting on a machine at load 40+
  // took over 60 s once (cli_test, beside tools/load.sh and sanitizer builds).
  const deadline = Date.now() + 300000;
  while (Date.now() < deadline) {
    await sleep(200);
    const s = await run(['status', '--session', 'alloc']);
    if (s.status === 0) return true;
    if (/Profile load failed/.test(s.stderr)) break;
  }
  console.log(r.stderr);
  return false;
}

// Function totals (bytes) by unqualified name.
async function totals(strategy, thread) {
  await json(['strategy', strategy]);
  const result = await json(['thread', 'functions', '--thread', thread]);
  check(result.weightType === 'bytes', `${strategy}: weightType ${result.weightType}`);
  const byName = {};
  for (const f of result.functions) {
    const name = f.name.replace(/\(anonymous namespace\)::/g, '').split('(')[0].split('::').pop();
    byName[name] = (byName[name] || 0) + f.totalSamples;
  }
  return byName;
}

async function main() {
  const truth = {};
  for (const line of fs.readFileSync(truthFile, 'utf8').split('\n')) {
    const m = /^truth (\S+) allocated=(\d+) retained=(\d+)/.exec(line);
    if (m) truth[m[1]] = { allocated: Number(m[2]), retained: Number(m[3]) };
  }
  try {
    check(await load(), `profiler-cli loads ${file}`);
    const list = await json(['thread', 'list']);
    const main = list.threads.find((t) => t.name === 'GeckoMain');
    check(main !== undefined, 'a GeckoMain thread');
    const thread = main ? main.threadHandle : 't-0';
    await json(['thread', 'select', thread]);

    const allocated = await totals('native-allocations', thread);
    for (const [name, t] of Object.entries(truth)) {
      const got = allocated[name] || 0;
      const error = (got - t.allocated) / t.allocated;
      check(Math.abs(error) <= 0.05,
            `native-allocations: ${name} ${got} bytes, truth ${t.allocated} (${(100 * error).toFixed(2)} %)`);
    }
    const retained = await totals('native-retained-allocations', thread);
    const leaked = Object.values(truth).reduce((sum, t) => sum + t.retained, 0);
    let others = 0;
    for (const [name, t] of Object.entries(truth)) {
      const got = retained[name] || 0;
      if (t.retained > 0) {
        const error = (got - t.retained) / t.retained;
        check(Math.abs(error) <= 0.05, `native-retained-allocations: ${name} ${got} bytes, ` +
              `truth ${t.retained} (${(100 * error).toFixed(2)} %)`);
      } else {
        others += got;
      }
    }
    if (leaked > 0) {
      check(others <= 0.01 * leaked,
            `native-retained-allocations: functions that leak nothing retain ${others} bytes ` +
            `(at most 1 % of ${leaked})`);
    }
  } catch (e) {
    check(false, `unexpected: ${e.stack || e}`);
  } finally {
    await run(['stop', '--all']);
  }
  console.log(failures === 0 ? 'PASS' : `FAIL: ${failures} failure(s)`);
  process.exit(failures === 0 ? 0 : 1);
}
main();
