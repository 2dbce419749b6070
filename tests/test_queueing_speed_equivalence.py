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
those rows were generated again the same way.
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
    (0, 36.79712859255636, 33.117415733300724, 22.0783, [38.727878470016904, 54.35604491314784, 59.71632273909277, 73.09240109412619, 13.122837786113841, 14.268231512170065, 14.445348336135163, 15.036962217781799, 3379.5234126832543, 3675.0588393330504, 3720.8760958714106, 3881.109131827143]),
    (1, 22.962141332639504, 20.665927199375556, 13.7773, [29.69189318140883, 87.77127367631527, 110.31886645674415, 154.27939756150295, 11.064145619412168, 13.296987876933352, 14.117800386223198, 15.718503781992553, 1478.3634270917778, 5752.695095978771, 6210.585635576956, 6825.173791144596]),
    (2, 2.980569069506447, 2.2957787726469276, 1.7883, [178.0781833607565, 261.28889892828937, 292.20495837556433, 368.0754539579393, 81.07242168266198, 87.0932109663985, 87.28027484191034, 90.56673846888235, 20863.796331077217, 22363.643540638503, 22450.093295332554, 23282.719099957394]),
    (3, 15.915759881866393, 13.811123057257955, 9.5493, [179.54566850666282, 383.7660490463924, 471.575417998537, 674.4589028688093, 45.995564626127404, 63.88001328842821, 67.19355743564266, 76.5472124048572, 3123.062011893563, 4175.352122683931, 4409.013417276017, 5173.6939020853515]),
    (4, 8.532660355382045, 5.068335814617415, 5.1196, [44.80915400110693, 370.8281615068298, 502.67204410830044, 743.4662324821923, 22.82367019958851, 30.18065880543751, 35.97568886001965, 38.990146803362165, 3176.234976160972, 11898.95048305738, 13048.397976375905, 14986.595967798268]),
    (5, 3.3272682298153313, 2.1157644457286873, 1.9964, [77.20967012327303, 501.3254974622726, 510.1862158041174, 876.2662551795079, 27.991284245835402, 39.60414409312306, 41.856771662951616, 55.45404174185599, 4533.301344896859, 15396.42575227497, 17217.114994354026, 20022.375195384404]),
    (6, 7.46677243832852, 6.720095194495668, 4.4801, [122.11981552260698, 126.19685542539841, 126.70648541324734, 127.14875713194785, 18.93379084813865, 22.246958066865467, 22.752956725438747, 24.18349673595209, 2525.9102061832455, 2946.6825763080515, 3009.757228727169, 3194.939253686514]),
    (7, 16.103037815043884, 14.492734033539495, 9.6618, [30.34701191087611, 35.140168428085175, 35.739312992505916, 36.67817352203162, 11.840640494406214, 12.994223933439487, 13.0139984858313, 13.058402101632238, 12346.417575816562, 13323.328647605227, 13342.731822613627, 13662.766342170095]),
    (8, 36.79712841323083, 30.271782471104235, 22.0783, [92.21908649656373, 194.5230148459944, 225.46943214224328, 290.4695281272198, 14.353728076598692, 18.41299474705609, 18.606361923507365, 21.123296610181566, 3711.5637042967433, 4772.688121803019, 4867.542472446541, 5539.389798886714]),
    (9, 36.79712859255636, 0.0, 22.0783, [38.727878470016904, 54.35604491314784, 59.71632273909277, 73.09240109412619, 13.122837786113841, 14.268231512170065, 14.445348336135163, 15.036962217781799, 3379.5234126832543, 3675.0588393330504, 3720.8760958714106, 3881.109131827143]),
    (10, 36.79712859255636, 33.117415733300724, 22.0783, [38.727878470016904, 54.35604491314784, 59.71632273909277, 73.09240109412619, 13.122837786113841, 14.268231512170065, 14.445348336135163, 15.036962217781799, 3379.5234126832543, 3675.0588393330504, 3720.8760958714106, 3881.109131827143]),
    (11, 19.547729859893334, 16.146618080389562, 11.7286, [44.59755972267137, 69.55512573647773, 84.64055161134004, 109.86018171256305, 9.594536405187885, 10.89121979051322, 11.109401098200786, 11.770440414438955, 2499.7243449190387, 2819.0865339976795, 2877.2466417888013, 3064.048436268724]),
    (12, 44.98456522670597, 40.48610870403537, 26.9907, [57.82741702331589, 74.7213585793241, 80.84134407072806, 96.25101771782337, 35.80993357077196, 38.34375093905736, 39.05880546316711, 40.306866989676315, 2314.835421991986, 2473.1583744000036, 2515.90322476248, 2605.3340126730163]),
    (13, 16.701932994412854, 13.38676863051521, 10.0212, [84.06334862284363, 142.806945186878, 166.50347912710373, 212.62983773597375, 32.058474309098635, 34.6124061207347, 35.52770480836469, 36.76364796385758, 8252.885724715377, 8915.21882084906, 9139.265492264296, 9496.06389880312]),
    (14, 6.963391833669963, 4.795638356624793, 4.178, [71.8187030738051, 454.5184590831529, 614.8017640509743, 889.0087125888062, 33.216482816525335, 43.736618633057944, 48.421500522025866, 50.93572334370181, 4668.016443130224, 17534.93103111701, 18792.345991779017, 21020.44771204628]),
    (15, 2.05633343261976, 0.4563504056421036, 1.2338, [1424.98790417485, 3430.0769524152083, 4221.593242381935, 6072.05863054987, 64.89748750315918, 182.02211686058124, 535.9640834736025, 557.4398272223196, 10816.886696314505, 41855.77160888942, 51450.449974624455, 79734.95129894532]),
    (16, 1.9596410454564686, 1.589926050934917, 1.1758, [607.1420914429038, 1602.6301709763015, 1921.4091707524217, 2616.355574658698, 55.057204875099536, 82.17163102292608, 93.2271302513971, 108.71412052278684, 7605.473726653432, 11366.271128721877, 12407.328058705556, 14947.227762378892]),
    (17, 41.27496627583182, 36.87638631311725, 24.765, [56.15787923890189, 73.64781044437972, 80.7786412778217, 97.28049607056066, 26.125155043402884, 27.389859448823866, 27.595220946793017, 28.23264379727876, 6720.426544201692, 7038.765070947338, 7090.566859771906, 7263.239861859166]),
    (18, 9.77106121075147, 7.222448277055837, 5.8681, [184.45391335251853, 546.6531002256336, 643.9740833040264, 932.626632531593, 46.14775223526615, 65.21819672837171, 71.25546121591567, 74.48052015528093, 6661.7721157443175, 24074.24811820692, 26070.203861765604, 29801.113895051894]),
    (19, 67.29097404827506, 48.939445187025086, 40.3746, [48.60054305615209, 58.491954694047244, 60.399199407066845, 63.46597865001552, 23.61718168306677, 24.629513339758994, 24.891817861469182, 25.241134269424464, 6070.976615631554, 6325.076303362898, 6391.519062640615, 6502.077653221936]),
    (20, 6.076112731764026, 3.5527297144556456, 3.6457, [145.916518037217, 254.46863761797138, 297.1550948990338, 388.6604034487633, 50.59413638174515, 57.40199646154148, 57.62619177221715, 61.27795526811461, 13058.463963044569, 14759.117074932683, 14866.810384735134, 15824.55413058614]),
    (21, 3.508163069941269, 1.2422532479726622, 2.1049, [105.03844315681948, 650.2860659587727, 663.0645447251213, 891.9423386975855, 62.463104480719856, 73.9941207881961, 81.19472843687792, 86.94681852692756, 8219.696732706925, 32559.88712462507, 34639.35934797135, 37320.847475895025]),
    (22, 6.11156381994822, 5.500407437953398, 3.6669, [103.85636233421843, 162.14613761936596, 186.11330648887218, 246.362645417086, 33.551019971929165, 35.86071941931352, 36.84093432417412, 38.01084871012633, 8639.210214936558, 9259.847089132834, 9492.799573166718, 9829.403670309785]),
    (23, 3.526952843015431, 0.8902909527090361, 2.1162, [208.28843976733447, 404.0000342049836, 489.8001736340009, 660.6356486244075, 47.26218621644338, 54.020452190004285, 56.37142251042308, 58.93067263334133, 12280.18927443545, 13970.290547675464, 14577.251765918507, 15484.56552949987]),
    (24, 1.112464550518936, 0.5794936845703497, 0.6675, [119.12615239551756, 860.6184984477234, 871.8672746900304, 1555.0760231356217, 44.58325730766121, 58.49474349708598, 62.47382703265123, 79.27717071234981, 7771.1140495189575, 24333.892876999285, 26650.640319038637, 30503.580966045458]),
    (25, 6.1123884304464475, 5.202244668748538, 3.6674, [100.12438493631893, 126.00556280957242, 140.51404718936658, 183.10815624531017, 59.28164989979338, 62.55730618975747, 63.44667981225134, 65.40158922496359, 3838.517191365566, 4048.3524988900604, 4111.32183695668, 4246.433096921337]),
    (26, 2.3216281449718923, 0.3802092743882632, 1.393, [192.98687575046898, 300.2646126958186, 336.53377112131705, 437.4713070941565, 72.82263961492123, 82.49058041959172, 85.64780623328117, 90.06517382527011, 18826.049112870915, 21221.724512408324, 22019.914566081818, 23205.810912872752]),
    (27, 15.768686510747997, 9.113474463348064, 9.4612, [81.49476607614936, 356.4343707399179, 427.2410238413065, 620.9838356817202, 26.751310943858776, 36.61535486280926, 39.921247329225295, 41.70270119959604, 3795.511410583931, 13977.87920031939, 15014.333657342617, 16991.714299867814]),
    (28, 33.28123555182242, 24.919691136017743, 19.9687, [44.01292151579278, 52.61896611916461, 53.69472169458609, 54.915606346877155, 21.518729041383413, 22.150079431582846, 22.171941057316374, 22.219392563115267, 22120.754883472186, 22702.082122020278, 22725.928932841736, 22913.593887143674]),
    (29, 10.933891941319759, 9.840502747187783, 6.5603, [70.7169117939485, 107.90529867245324, 128.06106643659288, 165.28655659322106, 21.872251761705122, 24.49953162057214, 24.75492883932242, 26.14611429990975, 5649.470696056456, 6313.480686413782, 6384.177756896864, 6755.587777177775]),
    (30, 13.194947406270083, 10.737432153436446, 7.917, [39.59355956293432, 213.97108802810018, 290.3104587411813, 446.4585107723357, 16.80019167904252, 21.57905990978456, 24.234778332177463, 26.640866349783394, 2344.70827137113, 8771.221171389063, 9612.430282556461, 10648.408612865558]),
    (31, 47.94807876400431, 43.1532708876037, 28.7688, [81.99780379217955, 104.25910165925308, 110.59724515047802, 123.27390676595948, 42.76868947758605, 44.60441775418688, 44.68809642895478, 45.664430851939294, 10988.65734414497, 11447.079439291478, 11479.938640272674, 11727.770111339045]),
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
