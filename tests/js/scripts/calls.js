// Call-heavy benchmark (docs/benchmarks.md): recursive fib, ~3 million calls per round.
function fib(n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}
const ROUNDS = 20;
let sum = 0;
for (let r = 0; r < ROUNDS; r++) sum += fib(27);
print("calls.js: sum=" + sum);
