# A Python workload with deep native stacks now and then (issue 20: the report's flame graph
# opened blank on deep stacks): most of the time a shallow loop; every round a recursion
# through builtins (sum -> map -> a Python function), which nests native frames (the
# interpreter's C recursion) about 8 per level.
import sys

sys.setrecursionlimit(10000)


def deep(n):
    return 0 if n == 0 else sum(map(deep, [n - 1])) + 1


def shallow(k):
    s = 0
    for i in range(k):
        s += i * i % 7
    return s


total = 0
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 40):
    total += shallow(40000)
    total += deep(100)
print("deep_python:", total)
