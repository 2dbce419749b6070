#!/usr/bin/env bash
# Wall and CPU time of `solver-cli solve` in a fresh process: one service
# (examples/s3-big-model.json) with the project's sources compiled on each run, then with
# their bytecode present (as an installed package has it), then the README example with its
# p99 SLOs. Only the project's .pyc files are removed for the first runs (the simulator's
# compiled core, also under __pycache__, stays), and the bytecode is written back after.
cd "$(dirname "$0")/.."
export PYTHONWARNINGS=ignore
run() {
  /usr/bin/time -f "%e s wall %U s user" "$@" > /dev/null || { echo "cli_cold.sh: $* failed" >&2; exit 1; }
}
find solver cli server -name '*.pyc' -delete
echo "-- one service, sources compiled on each run (no bytecode; PYTHONDONTWRITEBYTECODE=1)"
for i in 1 2 3; do PYTHONDONTWRITEBYTECODE=1 run .venv/bin/solver-cli solve examples/s3-big-model.json; done
PYTHONDONTWRITEBYTECODE= .venv/bin/python -m compileall -q solver cli server
echo "-- one service, bytecode present"
for i in 1 2 3 4 5; do run .venv/bin/solver-cli solve examples/s3-big-model.json; done
echo "-- examples/llm-platform.json (its p99 SLOs, simulation in the loop)"
for i in 1 2; do run .venv/bin/solver-cli solve examples/llm-platform.json; done
