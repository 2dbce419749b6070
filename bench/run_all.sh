#!/usr/bin/env bash
# Every figure of docs/benchmarks.md, one named run each, in a row (about 50 minutes on 2 cores).
#
#   bash bench/run_all.sh                 # all of them
#   bash bench/run_all.sh vs_sim targets  # only the runs whose names are given
#   bash bench/run_all.sh --list          # names and commands
#
# docs/benchmarks.md quotes each command exactly as it stands here (tests/test_bench_commands.py
# holds the two to each other), so a figure there can be re-measured by its name. Timing runs
# come first: the accuracy runs are deterministic and do not mind a busy machine, timings do.
cd "$(dirname "$0")/.."
export PYTHONWARNINGS=ignore PYTHONPATH=.
# Fresh processes find the project's bytecode, as an installed package has it (cli_cold
# measures the compiling case on its own); an inherited PYTHONDONTWRITEBYTECODE would make
# every cold-process figure pay for compiling the sources.
unset PYTHONDONTWRITEBYTECODE

RUNS=(
  # name | seconds allowed | command
  "solve_small|600|.venv/bin/python bench/solve_scaling.py --sizes 10 100 --seeds 3"
  "solve_1000|900|.venv/bin/python bench/solve_scaling.py --sizes 1000 --seeds 1"
  "solve_1000_gap|900|.venv/bin/python bench/solve_scaling.py --sizes 1000 --seeds 1 --relative-gap 0.0001"
  "cli_cold|300|bash bench/cli_cold.sh"
  "backends|600|.venv/bin/python bench/backends.py --services 100 --time-limit 60"
  "estimate|300|.venv/bin/python bench/estimate_speed.py"
  "percentile_100|1800|.venv/bin/python bench/percentile_scaling.py --sizes 100 --seeds 0 1 2 3 4"
  "queueing_speed|900|.venv/bin/python bench/queueing_speed.py"
  "bursty|900|.venv/bin/python bench/bursty_solve_time.py"
  "many_classes|600|.venv/bin/python bench/many_classes.py"
  "saturation_speed|300|.venv/bin/python bench/saturation_speed.py"
  "sim_speed|600|.venv/bin/python bench/sim_speed.py"
  "day|900|.venv/bin/python bench/horizon_scaling.py --case day --seeds 3 --time-limit 60"
  "week|600|.venv/bin/python bench/horizon_scaling.py --case week --time-limit 60"
  "replan|900|.venv/bin/python bench/horizon_scaling.py --case replan --seeds 3 --time-limit 150"
  "honesty|900|.venv/bin/python bench/horizon_honesty.py --sizes 8 15 --seeds 0 --short 3 --long 60"
  "deadlines|900|.venv/bin/python bench/deadlines.py"
  "deadlines_grpc|900|.venv/bin/python bench/deadlines.py --door grpc"
  "grpc|300|.venv/bin/python bench/load_grpc.py --clients 1,8 --duration-s 15 --workloads small"
  "grpc_jitter|300|.venv/bin/python bench/load_grpc.py --clients 8 --duration-s 15 --workloads small --jitter 0.2"
  "fair_lanes|300|.venv/bin/python bench/fair_lanes.py"
  "pool_memory|1200|.venv/bin/python bench/server_pool.py memory --solves 40 --services 300"
  "pool_cancel|300|.venv/bin/python bench/server_pool.py cancel --repeats 2"
  "pool_bombs|300|.venv/bin/python bench/server_pool.py bombs"
  "reviews|900|.venv/bin/python bench/review_throughput.py --scenarios 200 --workers 1 2"
  "redundancy|900|.venv/bin/python bench/redundancy.py --sizes 20 100 --time-limit 30"
  "disagg_cases|600|.venv/bin/python bench/disagg.py --mix 0 --speed 0"
  "disagg_mix|900|.venv/bin/python bench/disagg.py --skip-cases --speed 0 --mix 8"
  "disagg_speed|900|.venv/bin/python bench/disagg.py --skip-cases --mix 0 --speed 100"
  "trace|300|.venv/bin/python bench/trace_to_workload.py"
  "vs_sim|900|.venv/bin/python bench/queueing_vs_sim.py --jobs 2"
  "fixed_load|900|.venv/bin/python bench/queueing_fixed_load.py --cv 2"
  "cache_claims|600|.venv/bin/python bench/cache_claims.py --jobs 2"
  "monotone|600|.venv/bin/python bench/queueing_monotone.py"
  "ci_coverage|900|.venv/bin/python bench/sim_ci_coverage.py --quick"
  "targets|900|.venv/bin/python bench/under_load_targets.py --jobs 2"
  "under_load|600|.venv/bin/python bench/under_load_accuracy.py"
  "verify|900|.venv/bin/python bench/verify_plans.py --jobs 2"
  "fuzz|900|.venv/bin/python bench/fuzz.py --inputs 3000 --seed 11"
  "atheris|900|.venv/bin/python bench/fuzz_atheris.py -runs=200000 -timeout=2 -seed=1"
)

if [ "${1:-}" = "--list" ]; then
  for run in "${RUNS[@]}"; do IFS='|' read -r name _ cmd <<< "$run"; printf '%-18s %s\n' "$name" "$cmd"; done
  exit 0
fi
for want in "$@"; do
  found=0
  for run in "${RUNS[@]}"; do [ "${run%%|*}" = "$want" ] && found=1; done
  [ $found = 1 ] || { echo "run_all.sh: no run named '$want' (bash bench/run_all.sh --list)" >&2; exit 2; }
done

dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo " + uncommitted changes")
echo "== date $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg) commit $(git rev-parse --short HEAD 2>/dev/null)$dirty"
.venv/bin/python -m compileall -q solver cli server bench
failed=()
pid=
trap '[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; echo "== interrupted"; exit 130' INT TERM
for run in "${RUNS[@]}"; do
  IFS='|' read -r name limit_s cmd <<< "$run"
  if [ $# -gt 0 ]; then
    case " $* " in *" $name "*) ;; *) continue ;; esac
  fi
  echo "== $name: $cmd   ($(date -u +%TZ), load $(cut -d' ' -f1 /proc/loadavg))"
  start_s=$(date +%s)
  # In the background, so that an interrupt reaches the trap above (timeout puts its command
  # in a process group of its own, which a terminal's Ctrl-C does not reach).
  timeout "$limit_s" bash -c "$cmd" &
  pid=$!
  wait "$pid"
  status=$?
  pid=
  note=""
  [ "$status" = 124 ] && note=" (stopped at its ${limit_s} s limit)"
  [ "$status" = 0 ] || failed+=("$name")
  echo "== $name: exit $status$note, $(( $(date +%s) - start_s )) s"
done
echo "== done $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ${#failed[@]} -gt 0 ]; then
  echo "== failed: ${failed[*]}"
  exit 1
fi
