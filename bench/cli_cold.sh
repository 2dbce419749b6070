#!/usr/bin/env bash
# Wall and CPU time of `solver-cli solve` in a fresh process: one service
# (examples/s3-big-model.json) with sources compiled on each run, then with bytecode present
# (as an installed package has it), then the README example with its p99 SLOs.
cd "$(dirname "$0")/.."
export PYTHONWARNINGS=ignore
find solver cli server -name __pycache__ -type d -prune -exec rm -rf {} +
echo "-- one service, sources compiled on each run (PYTHONDONTWRITEBYTECODE)"
for i in 1 2 3; do
  PYTHONDONTWRITEBYTECODE=1 /usr/bin/time -f "%e s wall %U s user" .venv/bin/solver-cli solve examples/s3-big-model.json > /dev/null
done
PYTHONDONTWRITEBYTECODE= .venv/bin/python -m compileall -q solver cli server
echo "-- one service, bytecode present"
for i in 1 2 3 4 5; do
  /usr/bin/time -f "%e s wall %U s user" .venv/bin/solver-cli solve examples/s3-big-model.json > /dev/null
done
echo "-- examples/llm-platform.json (p99 SLOs, simulation in the loop)"
for i in 1 2; do
  /usr/bin/time -f "%e s wall %U s user" .venv/bin/solver-cli solve examples/llm-platform.json > /dev/null
done
find solver cli server -name __pycache__ -type d -prune -exec rm -rf {} +
