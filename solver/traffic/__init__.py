"""Workloads from traffic: a request trace or serving metrics turned into a workload file.

`solver-cli workload from-trace` (cli/workload_cmd.py) reads a trace with the replay's own
reader (solver/sim/trace.py) in one streaming pass and derives, per service:

* request classes by length (classes.py): few classes that keep the tail;
* the peak rate over a stated window, the arrival CV within stationary windows, and the
  hourly demand levels (rates.py), from running counts (accumulate.py);
* over a long enough trace, periods with a demand profile (periods.py);

or the same from Prometheus snapshots of vLLM or SGLang (prometheus.py); workload.py
writes the workload, saying how it was derived. The rules are in docs/traces.md.
"""
