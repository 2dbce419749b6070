"""The queueing model's speed-ups change no answer beyond the search's tolerance.

FROZEN holds values computed by the code BEFORE the speed work (commit 87c82f6, main at
the start of branch qfast; generated once by running these cases through that code):
per case the saturation rate, `max_rate_for_slo` and the percentiles at a fixed rate.
Issue 23 changed the physics on purpose (engine versions: their batch caps, KV-cache
types and admission, CUDA-graph limits, prefill-first scheduling), so FROZEN was generated
again with the same cases through the code of that change (0.6 x saturation as the fixed
rate, as before); the queueing computations themselves did not change there, and the
values now guard later speed work the same way. Bursty arrivals' step counts (issue 23:
exact gamma-renewal count variance, contents.py / renewal.py) changed the four rows with
arrival CV above 1 (cases 3, 8, 15, 18) on purpose; they were generated again the same way.
The decode window's arriving prompt work (model._tpot_parts: the compound count law for
windows of a few arrivals, a skewed normal beyond; a bursty arrival's cluster-mates; the
admissions a few-slot replica allows) changed every TPOT and so most caps on purpose
(within 10 %, except case 15, 8,192-token prompts at CV 2: 0.399 -> 0.564/s, where the
simulator gives p95 TPOT 80-84 ms against the 100 ms bound and TTFT 3.6-3.7 s against
5 s); all rows were generated again the same way (saturation rates unchanged).
A TPOT's window law no longer switches at one count (model._tpot_parts: the quantiles move
from the discrete law to the skewed normal over a band of counts; numerics._compress_tail
splits a node's weight over the bins it spans), so more load never lowers it by more
than noise; the rows that changed were generated again the same way (2026-12-06): caps
of cases 15 (0.564 -> 0.463/s: the old cap sat just below a jump of p95 TPOT from 75 to
177 ms, the skewed normal's value, which the blend now reaches gradually), 24 (-6.2 %),
23 (+1.5 %), 18 and 26 (< 0.2 %); percentiles of cases 6, 16, 25 (TPOT, up to 7.5 %).
Then the tail bins' edges moved off the reported percentiles (numerics._TAIL_EDGES: an edge
at 0.99 left the CDF flat at 0.99, so the cap search's verdict and the reported p99
disagreed) and caps are checked below them (search._BELOW): caps of cases 15, 18,
23, 26 moved by up to 2.5 %, TPOT percentiles of cases 6, 16, 25 by up to 4 %; those rows
were generated again the same way. A review then found mixtures whose CDF sits flat at
exactly p (one class complete, the other on an edge): a rate passes only where the CDF at
the bound clears p (search._passes); case 7's cap moved -1.2 %, generated again the same way.
Then the model's merged distributions split each member's weight over tail-refined bins
(numerics._split_shares: step contents, steps an arrival can land in, life-average steps;
midpoint bins lost the upper tail and jumped with the rate) and a bursty arrival's others
in its step follow the exact gamma-renewal Palm law (renewal.palm_count_pmf; the size-biased
negative binomial had twice the weight on 5+ others): every row's TTFT or latency
percentiles moved (up to 15.7 %, case 3: 8B on A10G at CV 2; otherwise under 13 %), caps of
cases 3 (+0.5 %), 7 (+1.2 %) and 16 (-4.4 %: 4,096-token prompts, the p99 TTFT's tail kept);
all rows were generated again the same way (2026-12-06). A bursty arrival's batch then
counts its cluster-mates (model._palm_batch_excess): TPOT and latency of the four rows with
arrival CV above 1 (cases 3, 8, 15, 18) moved by up to 2.9 %, case 15's cap by -1.5 %;
those rows were generated again the same way. Then a decode window that receives more
prompts than its mean also decodes a larger batch (model._batch_shifted_decode: half the
excess arrivals join it; before, batch and prompt work were independent): every row's TPOT
and latency moved (up to 8.6 %), caps by up to -6.3 %, case 26's by -15.9 % (Llama-2-13B on
an A100 with vLLM 0.5: at the old cap 0.380/s the simulator gives p99 TPOT 52.3 ms against
the 50 ms bound, the model now 51.4; at the new 0.320/s 50.6 and 49.8); all rows were
generated again the same way. A prefill-first engine's mean step then became a decode
step and the chain of prefill steps before the next (model._prefill_chain): case 4 (SGLang)
moved 0.11 % and was generated again the same way.
A prefill-first engine's decode window then prices its arriving prompts at the cost of their
own prefill-only steps (model._work_scale; the marginal per-token work before): the
prefill-first cases 4 (SGLang: cap -2.1 %, p90-p99 TPOT +2 %) and 26 (vLLM 0.5: cap -4.7 %)
were generated again the same way.
An arrival that finds the replica empty then starts its own step at once, alone
(model._idle_arrival): at the fixed rate (0.6 x saturation) that chance is small; TTFT
percentiles of cases 15 and 24 moved by up to 0.06 % (beyond the 2e-4 tolerance), no cap
moved; those rows were generated again the same way (2026-12-07). An independent review
then found the quantile search interpolating across that step (it lands on the step now),
and a held-back class (it found its class's slots taken) given the idle step too (its later
TTFT now follows the busy entries alone): case 16's p99 latency moved 0.02 %, generated again
the same way. A class then waits where the running sequences' KV claims leave it no room,
not only where every slot of the mean claim is taken, for the departures that free its
deficit, and behind those waiting (model._cache_law, _class_waits): case 24 (gemma-2-9b on
an L40S, 128- to 8,192-token prompts) p95 / p99 TTFT 875 -> 1,186 / 1,555 -> 6,199 ms at
0.6 x saturation (the simulator: p99 7.1-7.7 s over 300,000 requests), its cap -0.1 %; TTFT
percentiles and caps of the mixed-length cases 4, 5, 14, 15, 21 and 30 by under 0.2 %;
generated again the same way (2026-12-07). A bursty arrival then lands in a step with
content as its cluster-mates do - weighted by the renewal function's arrivals after the
content's prompt, early in the step rather than anywhere in it (model._bursty_landing,
_bursty_elapsed; the previous window's Palm share before): the four rows with arrival CV
above 1 moved - case 15 (70B on 4 x A100, three classes, CV 2) p50 / p90 / p99 TTFT 1,425 /
3,430 / 6,072 -> 1,454 / 3,675 / 7,028 ms at 0.6 x saturation (the simulator, 100,000
requests: 1,792 / 5,273 / 10,741), case 3's cap -2.0 % (its p99 TTFT 674 -> 680 ms, the
simulator 684), the others' TTFT by up to 6.4 %, caps by under 0.2 %; generated again the same
way (2026-12-07). An arrival's place among the prompts that arrive with it then decides the
step its own prompt finishes in where their content does not fit one step (model._split_ahead:
a quarter or three quarters of them ahead, not half): TTFT percentiles of 13 rows moved (case
16, 4,096-token prompts on 2 x H200: p90 / p95 -10.6 / -6.0 %; case 18 p50 -6.2 %; case 8 p99
+4.0 %; the others under 2.6 %), case 3's cap -0.9 %, the others' under 0.1 %; generated again
the same way (2026-12-07).
The under-load constants were then refitted on the current queueing model
(scripts/fit_under_load.py --loso --write: factors vLLM V1 1.052 -> 1.074, SGLang 1.100 ->
1.086, TensorRT-LLM PyTorch 0.994 -> 0.984, vLLM V0's prefill host time 1000 -> 4000 us):
every row but case 12 (llama.cpp, no generation factor) was generated again the same way -
saturation +2.09 % on the vLLM rows, -1.27 % on case 4 (SGLang), -1.01 % on case 6
(TensorRT-LLM), -1.32 % on case 26 (vLLM 0.5, V0's host time); caps by -2.8 to +9.1 %
(case 23, mistral-7b on an A10G: 0.834 -> 0.910/s); percentiles at the fixed rate (0.6 x
the new saturation) by up to 3.5 %.
Caps and saturation may move within the search tolerance (1 %); percentiles at a fixed
rate must stay within 2e-4 (relative). That is looser than rounding on purpose: two
inner roots are found by Illinois steps that now take another path to the same
tolerance (the old loops halved an end at every step and crept in linearly): the
mean step's fixed point (|gap| <= 1e-4 x span), and saturation, now stopped at
|h| <= 1e-4 r (was 1e-6, below the noise of the mean step inside h); their values move
within those tolerances (seen: saturation 8.2e-5, percentiles 1.05e-4).
"""

from __future__ import annotations

import math

import pytest

from solver.catalog import default_catalog
from solver.models import get_model
from solver.perf import PerfQuery
from solver.perf import queueing as Q

T = Q.TrafficClass
ONE = (T(1.0, 512, 256),)
SHORT = (T(1.0, 128, 64),)
LONGP = (T(1.0, 4096, 128),)
TWO = (T(0.8, 256, 128), T(0.2, 4096, 512))
THREE = (T(0.5, 128, 64), T(0.3, 1024, 256), T(0.2, 8192, 512))
DECODE = (T(1.0, 64, 1024),)

# model, gpu, gpus, precision, engine, classes, cv, percentile, bounds
CASES = [
    ("llama-3.1-8b", "H100-SXM", 1, "fp16", "vllm", ONE, 1.0, 99, dict(ttft_ms=800, tpot_ms=40)),
    ("llama-3.1-8b", "H100-SXM", 1, "fp8", "vllm", TWO, 1.0, 99, dict(ttft_ms=1500, tpot_ms=50)),
    ("llama-3.1-8b", "L4", 1, "fp16", "vllm", ONE, 1.0, 95, dict(ttft_ms=2000, tpot_ms=100)),
    ("llama-3.1-8b", "A10G", 1, "fp16", "vllm", SHORT, 2.0, 99, dict(ttft_ms=1000)),
    ("llama-3.1-8b", "A100-80GB", 1, "fp16", "sglang", TWO, 1.0, 90, dict(tpot_ms=30)),
    ("llama-3.1-8b", "L40S", 1, "fp8", "vllm", THREE, 1.0, 99, dict(ttft_ms=3000, tpot_ms=60)),
    ("llama-3.1-8b", "H100-SXM", 1, "fp16", "tensorrt-llm", LONGP, 0.5, 99, dict(ttft_ms=1000)),
    ("llama-3.1-8b", "H100-SXM", 1, "fp16", "vllm", DECODE, 1.0, 50, dict(latency_ms=20000)),
    ("llama-3.1-8b", "H100-SXM", 1, "fp16", "vllm", ONE, 3.0, 99, dict(ttft_ms=800, tpot_ms=40, latency_ms=12000)),
    ("llama-3.1-8b", "H100-SXM", 1, "fp16", "vllm", ONE, 1.0, 99, dict(ttft_ms=5, tpot_ms=40)),  # too tight: 0
    ("llama-3.1-8b", "H100-SXM", 1, "fp16", "vllm", ONE, 1.0, 99, dict(ttft_ms=1e6, tpot_ms=1e5)),  # loose: top
    ("llama-3.2-1b", "A10G", 1, "fp16", "vllm", ONE, 1.0, 99, dict(ttft_ms=500, tpot_ms=20)),
    ("llama-3.2-3b", "L4", 1, "fp16", "llama.cpp", SHORT, 1.0, 95, dict(ttft_ms=2000, tpot_ms=80)),
    ("llama-3.1-70b", "H100-SXM", 4, "fp16", "vllm", ONE, 1.0, 99, dict(ttft_ms=3000, tpot_ms=60)),
    ("llama-3.1-70b", "H100-SXM", 2, "fp8", "vllm", TWO, 1.0, 99, dict(ttft_ms=3000, tpot_ms=60)),
    ("llama-3.1-70b", "A100-80GB", 4, "fp16", "vllm", THREE, 2.0, 95, dict(ttft_ms=5000, tpot_ms=100)),
    ("llama-3.1-70b", "H200", 2, "fp16", "vllm", LONGP, 1.0, 99, dict(ttft_ms=4000)),
    ("mixtral-8x7b", "H100-SXM", 2, "fp16", "vllm", ONE, 1.0, 99, dict(ttft_ms=2000, tpot_ms=50)),
    ("mixtral-8x7b", "A100-80GB", 2, "fp16", "vllm", TWO, 1.5, 90, dict(ttft_ms=3000, tpot_ms=80)),
    ("qwen3-30b-a3b", "H100-SXM", 1, "fp8", "vllm", ONE, 1.0, 99, dict(ttft_ms=1000, tpot_ms=30)),
    ("qwen2.5-32b", "L40S", 2, "fp8", "vllm", ONE, 1.0, 99, dict(ttft_ms=2000, tpot_ms=60)),
    ("qwen2.5-7b", "L4", 1, "fp8", "vllm", TWO, 0.8, 99, dict(ttft_ms=2000, tpot_ms=60)),
    ("qwen2.5-14b", "A100-40GB", 1, "fp16", "vllm", ONE, 1.0, 99, dict(latency_ms=15000)),
    ("mistral-7b", "A10G", 1, "fp16", "vllm", ONE, 1.0, 99, dict(ttft_ms=1000, tpot_ms=40)),
    ("gemma-2-9b", "L40S", 1, "fp16", "vllm", THREE, 1.0, 99, dict(ttft_ms=2500, tpot_ms=70)),
    ("llama-2-7b", "T4", 1, "fp16", "vllm", SHORT, 1.0, 99, dict(ttft_ms=3000, tpot_ms=150)),
    ("llama-2-13b", "A100-80GB", 1, "fp16", "vllm-0.5", ONE, 1.0, 99, dict(ttft_ms=1500, tpot_ms=50)),
    ("llama-3.3-70b", "H100-SXM", 8, "fp16", "vllm", TWO, 1.0, 99, dict(ttft_ms=1500, tpot_ms=40)),
    ("gpt-oss-20b", "H100-SXM", 1, "fp16", "vllm", DECODE, 1.0, 99, dict(tpot_ms=25)),
    ("qwen3-8b", "RTX-4090", 1, "fp8", "vllm", ONE, 1.0, 99, dict(ttft_ms=1500, tpot_ms=60)),
    ("llama-3.1-8b", "MI300X", 1, "fp16", "vllm", TWO, 1.0, 99, dict(ttft_ms=1500, tpot_ms=50)),
    ("deepseek-v3", "H200", 8, "fp8", "vllm", ONE, 1.0, 99, dict(ttft_ms=3000, tpot_ms=80)),
]


def _replica(model, gpu, gpus, precision, engine):
    g = default_catalog().gpus[gpu]
    q = PerfQuery(model=get_model(model), gpu=g, gpus_per_replica=gpus, interconnect="nvlink" if gpus > 1 else "none",
                  usable_memory_gib=g.memory_gib, precision=precision, engine=engine)
    return Q.replica_for(q)


# (case, saturation rate, max_rate_for_slo, fixed rate, percentiles at it: TTFT p50/90/95/99, TPOT, latency; ms)
FROZEN = [
    (0, 37.566650293161146, 33.809985263845036, 22.54, [38.15886039334957, 53.46688373465491, 58.717366039645555, 71.8194203155985, 12.816385781474956, 14.270697334198685, 14.381414341009988, 15.138738695947435, 3308.1925356227016, 3672.833651016932, 3705.406687128919, 3906.631402178231]),
    (1, 23.44233820461488, 21.098104384153395, 14.0654, [29.307960875641903, 86.19762689533313, 108.28325533633974, 151.1616512979998, 10.804005666218911, 13.601661400537035, 14.43540690434707, 16.04350543766791, 1448.1112051385653, 5632.653632851196, 6248.835539379097, 7024.975238545286]),
    (2, 3.0429003618345076, 2.3416831213301355, 1.8257, [174.65476091840034, 256.1610596877283, 286.4438003686977, 360.76030696484645, 79.38620499694352, 86.12374171068174, 87.57521783954783, 90.91082274276533, 20436.050978805095, 22118.193805003328, 22493.278019753816, 23396.38126520901]),
    (3, 16.248598966848366, 13.794153668938785, 9.7492, [172.6376924070979, 365.35880735358216, 452.29938669392396, 666.3967721997734, 45.34850701412075, 64.71575610737375, 68.01336502874608, 78.86562047133413, 3048.791463853738, 4217.12364417113, 4453.650499409915, 5323.418934561324]),
    (4, 8.401627030508676, 4.699596919900124, 5.041, [45.19647224596333, 374.3152407512215, 507.9666987805401, 751.6993039588962, 22.557051598352928, 32.21488712130618, 38.180960904373265, 41.274830067939845, 3243.5140085844246, 11829.277317113965, 13482.459146873463, 16284.077341087394]),
    (5, 3.3968498848114694, 2.1295335328952616, 2.0381, [75.85164130086868, 491.3059224449275, 500.3147201389555, 871.0924162508218, 27.767923871983825, 41.28437829709106, 41.61229089824936, 56.61302882098554, 4155.383108932407, 14808.524024229333, 17556.92799039462, 20992.172327130596]),
    (6, 7.391654003335265, 6.652488603001739, 4.435, [123.24954075308915, 127.36800163823759, 127.88280924888114, 128.34826045565114, 19.019015331951344, 22.92035307733863, 23.309706035935232, 24.928181951571005, 2538.394528273177, 3033.864389302474, 3082.2089932188946, 3291.591109397712]),
    (7, 16.439793358704485, 14.795814022834037, 9.8639, [29.949728314455722, 34.644714048940386, 35.231587265525285, 36.15122202063518, 11.796972513075133, 12.602825990732741, 12.86910055732192, 13.163981839662496, 12076.967234368833, 12912.601281822002, 13191.862121068614, 13542.989707989216]),
    (8, 37.56665011008547, 30.255809573393798, 22.54, [87.88648406974241, 178.59807437449982, 212.44310930062295, 296.35553016343454, 13.73150873487338, 18.615052805148935, 19.535315336306766, 22.276485033023285, 3597.0459896573475, 4825.5103094001, 5059.130648429375, 5826.146521635268]),
    (9, 37.566650293161146, 0.0, 22.54, [38.15886039334957, 53.46688373465491, 58.717366039645555, 71.8194203155985, 12.816385781474956, 14.270697334198685, 14.381414341009988, 15.138738695947435, 3308.1925356227016, 3672.833651016932, 3705.406687128919, 3906.631402178231]),
    (10, 37.566650293161146, 33.809985263845036, 22.54, [38.15886039334957, 53.46688373465491, 58.717366039645555, 71.8194203155985, 12.816385781474956, 14.270697334198685, 14.381414341009988, 15.138738695947435, 3308.1925356227016, 3672.833651016932, 3705.406687128919, 3906.631402178231]),
    (11, 19.956522689663018, 16.343250208970396, 11.9739, [43.908337826488925, 68.35470799337729, 83.13117103227415, 107.8396015352963, 9.47307603148206, 10.780848677396103, 11.24934886796664, 11.912002685431139, 2444.638205285756, 2790.407970795448, 2911.0682266354097, 3099.317271800998]),
    (12, 44.98456522670597, 40.48610870403537, 26.9907, [57.82741702331589, 74.7213585793241, 80.84134407072806, 96.25101771782337, 35.88451208904197, 38.70218869936518, 39.86195849417339, 41.251022706994746, 2316.9652252543206, 2501.669634848973, 2562.708842971231, 2664.1510018855656]),
    (13, 17.05121296197661, 13.599710454594796, 10.2307, [82.56540013293917, 140.10536505215336, 163.3161551353609, 208.49773947610478, 31.167159756081613, 34.267352865870095, 35.439879652728735, 36.712839187791225, 8074.9845949282535, 8833.222163960498, 9113.306321002688, 9496.943245884298]),
    (14, 7.109014096351297, 4.89918558892666, 4.2654, [70.57213939906835, 445.435929358258, 602.4350990090754, 871.0830478293135, 32.72912310120023, 43.81876452116322, 48.47040758835926, 50.95092684998809, 4601.965029988543, 17178.69406938025, 18679.92104287433, 21537.49623547001]),
    (15, 2.099336603263899, 0.46730755264865764, 1.2596, [1436.747642097973, 3613.6752951110257, 4676.494033500159, 7027.687452224405, 61.921974086439434, 183.1273865800296, 528.0026939695604, 549.5819336203433, 10585.24358768558, 41892.67938022016, 51773.77347379412, 81761.37376894355]),
    (16, 2.00062213195841, 1.6300839631297435, 1.2004, [594.9267638948203, 1403.1198389536132, 1769.037157222164, 2557.559922583222, 53.929238085420586, 81.22763314274818, 92.30876488981791, 107.9262453515991, 7439.6780239754435, 11152.877941516539, 12281.386767868968, 14810.299997980903]),
    (17, 42.138130969812906, 37.496444748084485, 25.2829, [55.23183404552905, 72.36349944772644, 79.34826127040792, 95.51209004912862, 25.603467053262644, 26.952730052635868, 27.41194644524222, 28.04130487026926, 6581.774213089676, 6927.939270740552, 7040.3323572779245, 7215.688297313471]),
    (18, 9.975398992725216, 7.366042595005566, 5.9852, [166.78244081044923, 526.1936264353714, 629.7838026656266, 950.5275679233525, 44.67336072368494, 65.11108001744967, 71.05601933870813, 74.23563267683645, 6560.81757985566, 23478.549793249163, 25876.30679900762, 30382.623169564064]),
    (19, 68.69819974129355, 50.529748182391835, 41.2189, [47.82928364508051, 57.51807151656479, 59.38624667347786, 62.39020414511266, 23.124439940568926, 24.300823404196578, 24.524499267713512, 25.105767381651827, 5944.644464724541, 6242.205444449767, 6297.924154183874, 6454.7514404690255]),
    (20, 6.203179728055675, 3.596881376367404, 3.7219, [143.15118072461098, 249.47733817538239, 291.2906914365225, 381.61470494167634, 49.4479318418789, 56.804253297601285, 58.323262777963656, 61.966091332262835, 12815.424932268816, 14606.991160623294, 15008.930715331968, 16008.755898299203]),
    (21, 3.58152769687918, 1.2535159325422187, 2.1489, [103.11067683159563, 637.0528750493446, 649.569669150578, 854.3351876848071, 61.66487062814847, 74.64047926738428, 81.91843322106584, 87.62519553656104, 8089.788580198304, 31861.74787939441, 34532.3921247751, 38742.49558149289]),
    (22, 6.239372188806457, 5.615434969925811, 3.7436, [101.95333874844252, 159.04928077281042, 182.52584420759942, 241.5412280104418, 32.546392077466564, 35.7532708848326, 36.80703809625908, 37.98538856284823, 8447.379092827254, 9214.488691697621, 9481.795138562233, 9860.506530838464]),
    (23, 3.600710411975827, 0.9099649252838062, 2.1604, [204.2450583145254, 395.93807547887843, 479.98405907837395, 647.4287063211763, 46.47883443012053, 54.25261819963215, 56.627239567039794, 60.04089889564765, 12021.923614867992, 13997.080398221142, 14637.11205714254, 15645.650889247972]),
    (24, 1.1357290183054565, 0.575676497542358, 0.6814, [119.20233556747593, 849.2887280409873, 1160.5416185472657, 6070.136285378078, 43.37985483084164, 60.796775888139834, 62.82267535624217, 81.59847767194795, 7267.579457867096, 23407.27275600348, 27267.699418617573, 32499.087769479225]),
    (25, 6.240214044010952, 5.324950245872232, 3.7441, [98.29765254660889, 123.61161407249122, 137.8600870465105, 179.5827646497015, 58.07009056926875, 61.99822114581246, 63.14801858338998, 65.4042079437313, 3758.517627194925, 4010.2293767275646, 4086.2878655167424, 4242.810085330657]),
    (26, 2.288635072288125, 0.3034324870413219, 1.3732, [199.79635957001193, 310.26714719126863, 344.61644017162143, 449.2404053161524, 73.12361720459039, 87.5340929328516, 87.85575741089131, 95.63825132597171, 18879.914870826542, 22454.901423710096, 22610.617380271888, 24637.7559827094]),
    (27, 16.098449916866308, 9.40458709225495, 9.6591, [80.05105970604806, 349.3587819992007, 418.7400191884114, 603.668659267912, 26.08306784236118, 36.457153336772365, 39.725440479849965, 41.482057548814005, 3737.3575686189424, 13650.57299782989, 14870.03709558933, 17211.302342403313]),
    (28, 33.977230972093544, 25.82351859196226, 20.3863, [43.33565723906971, 51.765414774074024, 52.81913446594956, 54.01501038855354, 21.13913310226449, 21.617698238237764, 21.79589076415389, 22.0049890181071, 21668.7056952113, 22160.055546379925, 22333.892207789697, 22553.96580535379]),
    (29, 11.16254747621428, 10.046292728592853, 6.6975, [69.49266278248137, 105.91930995558893, 125.6622534875261, 162.12942400840043, 21.35874298154056, 24.517401293460527, 24.90429450221173, 26.535699060781486, 5527.274670724706, 6311.825823626039, 6418.442347545066, 6860.277884256894]),
    (30, 13.470887371039995, 10.89929486190005, 8.0825, [39.01860604521203, 209.81057964870104, 284.58496317255214, 437.53438734672466, 16.75758568997795, 21.667647559177464, 24.62342187710123, 27.042873285487797, 2299.9727064447857, 8586.12814780671, 9640.067360167272, 11238.959642121757]),
    (31, 48.950795240119746, 44.05571571610777, 29.3705, [80.54254868300734, 102.34782235727776, 108.55621629579117, 120.97323874164805, 41.889948341104216, 43.89150464516926, 44.25386624630377, 45.24985089718765, 10764.51518977485, 11269.659521011568, 11359.806880260401, 11629.882250534003]),
]

CAP_RTOL = 0.01
PCT_RTOL = 2e-4


@pytest.fixture(scope="module")
def replicas():
    return {}


def _rep(replicas, i):
    if i not in replicas:
        replicas[i] = _replica(*CASES[i][:5])
    return replicas[i]


@pytest.mark.parametrize("row", FROZEN, ids=[f"case{r[0]}" for r in FROZEN])
def test_saturation_and_cap_match_the_frozen_values(row, replicas):
    i, sat, cap, _, _ = row
    _, _, _, _, _, classes, cv, p, bounds = CASES[i]
    rep = _rep(replicas, i)
    got_sat = Q.load_model(rep, classes, cv).saturation_rate()
    assert got_sat == pytest.approx(sat, rel=CAP_RTOL)
    got = Q.max_rate_for_slo(rep, classes, p, arrival_cv=cv, **bounds)
    if cap == 0.0:
        assert got == 0.0
    else:
        # 1 % of the cap, or the search's own resolution (it stops within 0.5 % of
        # saturation below the edge) where that is coarser.
        assert abs(got - cap) <= max(CAP_RTOL * cap, 0.005 * sat)


@pytest.mark.parametrize("row", FROZEN, ids=[f"case{r[0]}" for r in FROZEN])
def test_percentiles_at_a_fixed_rate_match_the_frozen_values(row, replicas):
    i, _, _, rate, values = row
    _, _, _, _, _, classes, cv, _, _ = CASES[i]
    at = Q.percentiles_at_rate(_rep(replicas, i), classes, rate, cv)
    got = [at.ttft_ms[q] for q in Q.PERCENTILES] + [at.tpot_ms[q] for q in Q.PERCENTILES] + \
        [at.latency_ms[q] for q in Q.PERCENTILES]
    for g, v in zip(got, values):
        assert math.isclose(g, v, rel_tol=PCT_RTOL), (got, values)
