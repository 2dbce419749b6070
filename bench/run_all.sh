#!/usr/bin/env bash
# Every benchmark of docs/benchmarks.md "Current figures", in a row (about 14 minutes on 2 cores).
cd "$(dirname "$0")/.."
export PYTHONWARNINGS=ignore
echo "== date $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== solve_scaling 10 100"; timeout 600 .venv/bin/python bench/solve_scaling.py --sizes 10 100 --seeds 3
echo "== cli cold one service (sources compiled on each run: PYTHONDONTWRITEBYTECODE here)"; for i in 1 2 3; do /usr/bin/time -f "%e s wall %U s user" .venv/bin/solver-cli solve examples/s3-big-model.json > /dev/null; done
# An installed package has its bytecode; compile ours once (Python checks it against the sources).
PYTHONDONTWRITEBYTECODE= .venv/bin/python -m compileall -q solver cli server
echo "== cli cold one service (bytecode present)"; for i in 1 2 3 4 5; do /usr/bin/time -f "%e s wall %U s user" .venv/bin/solver-cli solve examples/s3-big-model.json > /dev/null; done
find solver cli server -name __pycache__ -type d -prune -exec rm -rf {} +
echo "== cli llm-platform (p99)"; for i in 1 2; do /usr/bin/time -f "%e s wall %U s user" .venv/bin/solver-cli solve examples/llm-platform.json > /dev/null; done
echo "== queueing_speed"; timeout 900 .venv/bin/python bench/queueing_speed.py
echo "== horizon day replan"; timeout 900 .venv/bin/python bench/horizon_scaling.py --case day replan
echo "== solve_scaling 1000"; timeout 900 .venv/bin/python bench/solve_scaling.py --sizes 1000 --seeds 1
echo "== solve_scaling 1000, to a 0.01 % gap"; timeout 900 .venv/bin/python bench/solve_scaling.py --sizes 1000 --seeds 1 --relative-gap 0.0001
echo "== horizon week"; timeout 300 .venv/bin/python bench/horizon_scaling.py --case week
echo "== grpc small, 1 and 8 clients"; timeout 300 .venv/bin/python bench/load_grpc.py --clients 1,8 --duration-s 15 --workloads small
echo "== grpc small, 8 clients, demand jittered per call"; timeout 300 .venv/bin/python bench/load_grpc.py --clients 8 --duration-s 15 --workloads small --jitter 0.2
echo "== review_throughput"; timeout 900 .venv/bin/python bench/review_throughput.py --scenarios 200 --workers 1 2
echo "== done $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
