// Threads of a thread_churn_program profile (tests/host_safety/thread_churn_test.sh):
//   node thread_churn_check.js PROFILE.json
// prints "churn_threads=N empty_churn_threads=E", where N counts the threads named churn-*
// and E those of them with neither a sample nor a marker in the profile.
'use strict';
const fs = require('fs');
const profile = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
let churn = 0;
let empty = 0;
for (const thread of profile.threads) {
  if (!String(thread.name).startsWith('churn-')) continue;
  ++churn;
  const samples = thread.samples && thread.samples.data ? thread.samples.data.length : 0;
  const markers = thread.markers && thread.markers.data ? thread.markers.data.length : 0;
  if (samples === 0 && markers === 0) ++empty;
}
console.log(`churn_threads=${churn} empty_churn_threads=${empty}`);
