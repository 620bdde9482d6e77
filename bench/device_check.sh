#!/usr/bin/env bash
# The checks that need real hardware, in one command (issue 24): on whatever
# machine it is given, it finds the cores, a GPU and a PMU, runs what it can
# of the five measurements below within 8 minutes (--short: well under one),
# and says what it skipped and why. It needs the build folder (build/bin, or
# $HUSHMON_BIN) and a Python (the .venv's, else python3 with python/ on its
# path); each part finds its own tools and skips without them.
#
#   1 agent_full_node   hushmon-agent on a node whose every core is busy: CPU
#                       per sample (all threads) and wake-up lateness; the
#                       delay it can add to a synchronized job, as a share of
#                       the period (goal below 0.01 %)
#   2 sink_cost         the nats sink's CPU per sample next to the spool sink's
#                       (bench/bench_agent_cost.py --sinks-only; goal <= 1.10)
#   3 nvml_under_load   the agent's gpu_nvidia reading while the GPU is busy
#                       (a PyTorch matrix product loop), next to nvidia-smi's
#   4 bench_accuracy    hushmon-bench WaitPatternUp/Null at the node's core
#                       count: error against the true time, clock drift
#   5 mux_overhead      hushmon overhead of the agent with hardware counters
#                       (kernel multiplexing) against none, where a PMU exists
#
#   bench/device_check.sh [--short] [--out DIR]
#   bench/device_check.sh --pack-libs DIR   # copy the built programs' shared
#                                           # libraries (libnats...) into DIR
#
# A machine without this one's libraries: pack them here into a folder the
# copy carries (e.g. build/libs), and the script there adds $HUSHMON_LIBS
# (default build/libs) to LD_LIBRARY_PATH.
#
# Writes DIR/device_check.json and DIR/device_check.md (default
# ./device-check-<UTC time>/), and prints the table. Exit 0 when every part
# ran or was skipped with its reason; 1 when a part that could run failed.
set -uo pipefail
cd "$(dirname "$0")/.."

SHORT=0
OUT=""
PACK=""
while [ $# -gt 0 ]; do
    case "$1" in
        --short) SHORT=1 ;;
        --out) OUT="${2:?--out needs a folder}"; shift ;;
        --pack-libs) PACK="${2:?--pack-libs needs a folder}"; shift ;;
        -h|--help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "device_check: unknown argument '$1' (--short, --out DIR, --pack-libs DIR)" >&2
           exit 2 ;;
    esac
    shift
done
BIN="${HUSHMON_BIN:-build/bin}"
if [ -n "$PACK" ]; then
    # What the programs link beyond the C library itself: the loader there
    # may lack any of it (libnats, libprotobuf-c, OpenSSL, MPI's own). Every
    # part of glibc stays behind: libresolv or libnss_* from this glibc,
    # first on LD_LIBRARY_PATH beside a newer one there, would break on its
    # GLIBC_PRIVATE symbols.
    mkdir -p "$PACK" || exit 2
    for exe in "$BIN"/hushmon-agent "$BIN"/hushmon-bench; do
        ldd "$exe" 2>/dev/null | awk '$3 ~ /^\// {print $3}' \
            | grep -Ev '/(libc|libm|libdl|librt|libpthread|libresolv|libanl|libutil|libnsl|libnss_[a-z]+|libBrokenLocale|ld-linux[^/]*)\.so' \
            | while read -r lib; do cp -L "$lib" "$PACK/"; done
    done
    echo "device_check: $(ls "$PACK" | wc -l) libraries in $PACK: $(ls "$PACK" | tr '\n' ' ')"
    exit 0
fi
LIBS="${HUSHMON_LIBS:-build/libs}"
if [ -d "$LIBS" ]; then
    # Only the packed libraries this machine's loader lacks: a packed libssl
    # or libz ahead of the machine's own would be loaded by its python3 (and
    # PyTorch's extensions) too, older than what they were built against.
    LIBS_MISSING="$(mktemp -d)" || exit 2
    trap 'rm -rf "$LIBS_MISSING"' EXIT
    KNOWN_LIBS="$(ldconfig -p 2>/dev/null | awk 'NR > 1 {print $1}')"
    for lib in "$LIBS"/*; do
        name="$(basename "$lib")"
        grep -qxF "$name" <<<"$KNOWN_LIBS" || ln -s "$(cd "$(dirname "$lib")" && pwd)/$name" "$LIBS_MISSING/"
    done
    export LD_LIBRARY_PATH="$LIBS_MISSING${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
OUT="${OUT:-device-check-$(date -u +%Y%m%dT%H%M%S)}"
mkdir -p "$OUT/parts" || exit 2
PARTS="$OUT/parts"
START_S=$(date +%s)
# Each part gets at most this long (timeout kills it); together under 8 min.
if [ "$SHORT" = 1 ]; then BUDGET_S=(0 8 12 8 10 10); else BUDGET_S=(0 70 110 45 120 120); fi

say() { echo "device_check: $*" >&2; }

# A part's result: name status why [figures-json]
record() {
    local name="$1" status="$2" why="$3" figures="${4:-}" seconds="${5:-0}"
    "$SYS_PY" - "$PARTS/$name.json" "$name" "$status" "$why" "$figures" "$seconds" <<'EOF'
import json, sys
path, name, status, why, figures, seconds = sys.argv[1:]
doc = {"part": name, "status": status, "why": why, "seconds": float(seconds),
       "figures": json.loads(figures or "{}")}
open(path, "w").write(json.dumps(doc, indent=1) + "\n")
EOF
    say "$name: $status${why:+ ($why)}"
}

# ---- the machine ----------------------------------------------------------

SYS_PY="$(command -v python3 || true)"
if [ -z "$SYS_PY" ]; then echo "device_check: no python3 on this machine" >&2; exit 2; fi
PY=""
if [ -x .venv/bin/python ] && .venv/bin/python -c 'import hushmon, numpy' 2>/dev/null; then
    PY=.venv/bin/python
elif PYTHONPATH=python "$SYS_PY" -c 'import hushmon' 2>/dev/null; then
    PY="$SYS_PY"; export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
fi
CORES=$(nproc)
CPU_MODEL=$(sed -n 's/^model name\s*:\s*//p' /proc/cpuinfo | head -1)
MEM_GIB=$(awk '/MemTotal/ {printf "%.1f", $2 / 1048576}' /proc/meminfo)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

AGENT="$BIN/hushmon-agent"
AGENT_OK=0; AGENT_WHY=""
if [ ! -x "$AGENT" ]; then AGENT_WHY="$AGENT not built (make)"
elif ! "$AGENT" --help >/dev/null 2>"$OUT/agent-start.err"; then
    missing=$(ldd "$AGENT" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' ')
    AGENT_WHY="$AGENT does not start here: ${missing:+missing ${missing}(--pack-libs); }$(tail -1 "$OUT/agent-start.err")"
else AGENT_OK=1; fi

GPU=""; GPU_WHY=""
if command -v nvidia-smi >/dev/null 2>&1; then
    GPU=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
    [ -n "$GPU" ] || GPU_WHY="nvidia-smi finds no GPU"
else GPU_WHY="no nvidia-smi (no NVIDIA driver)"; fi

# A PMU: perf's instructions event counts, else the agent's own probe.
PMU=0; PMU_HOW=""
if command -v perf >/dev/null 2>&1; then
    if perf stat -x, -e instructions true 2>&1 >/dev/null | grep -q '^[0-9]'; then
        PMU=1; PMU_HOW="perf stat -e instructions counts"
    else PMU_HOW="perf stat -e instructions: not supported"; fi
elif [ "$AGENT_OK" = 1 ]; then
    if "$AGENT" --once --sink stdout --sources pmu --pmu kernel 2>&1 >/dev/null \
        | grep -q "hardware counters unavailable"; then
        PMU_HOW="no perf; the agent: hardware counters unavailable"
    else PMU=1; PMU_HOW="no perf; the agent opened hardware counters"; fi
else PMU_HOW="no perf and no agent to ask"; fi

MPIRUN="$(command -v mpirun || true)"
MPI_ARGS=()
if [ -n "$MPIRUN" ] && "$MPIRUN" --version 2>&1 | grep -q "Open MPI"; then
    MPI_ARGS=(--oversubscribe)
    [ "$(id -u)" = 0 ] && MPI_ARGS+=(--allow-run-as-root)
fi
NATS_SERVER="$(command -v nats-server || true)"

"$SYS_PY" - "$OUT/machine.json" "$(hostname)" "$CORES" "$CPU_MODEL" "$MEM_GIB" "$GPU" \
    "$GPU_WHY" "$PMU" "$PMU_HOW" "$MPIRUN" "$NATS_SERVER" "$PY" "$AGENT_OK" "$AGENT_WHY" "$SHORT" \
    "$LOAD_START" <<'EOF'
import json, sys
(path, host, cores, model, mem, gpu, gpu_why, pmu, pmu_how, mpirun, nats, py, agent, agent_why,
 short, load) = sys.argv[1:]
json.dump({"host": host, "cores": int(cores), "cpu_model": model, "memory_gib": float(mem),
           "gpu": gpu or None, "gpu_why": gpu_why, "pmu": pmu == "1", "pmu_how": pmu_how,
           "mpirun": mpirun or None, "nats_server": nats or None, "python": py or None,
           "agent": agent == "1", "agent_why": agent_why, "short": short == "1",
           "loadavg_start": load}, open(path, "w"), indent=1)
EOF
say "$CORES cores ($CPU_MODEL), ${MEM_GIB} GiB; GPU: ${GPU:-none ($GPU_WHY)}; PMU: $PMU ($PMU_HOW)"

elapsed() { echo $(( $(date +%s) - $1 )); }

# On-CPU time of all a process's threads, ns (schedstat: finer than clock ticks).
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{t += $1} END {printf "%d", t}'; }

# ---- 1: the agent on a full node -------------------------------------------

part_agent_full_node() {
    local name=agent_full_node t0; t0=$(date +%s)
    [ "$AGENT_OK" = 1 ] || { record $name skipped "$AGENT_WHY"; return; }
    local period_ms=1000 run_s=$(( ${BUDGET_S[1]} - 10 ))
    if [ "$SHORT" = 1 ]; then period_ms=200; run_s=3; fi
    local spin=() i
    # Every core busy, as under a job that fills the node; niced like a job.
    for i in $(seq "$CORES"); do
        timeout $(( run_s + 3 )) sh -c 'while :; do :; done' &
        spin+=($!)
    done
    "$AGENT" --period-ms "$period_ms" --sink stdout --socket '' --sources default \
        >"$OUT/agent_full_node.lp" 2>"$OUT/agent_full_node.err" &
    local agent=$!
    # CPU from the second period on: the first one opens every source
    sleep "$(awk "BEGIN {print 1.5 * $period_ms / 1000}")"
    local stat0 lines0 stat
    stat0=$(cpu_ns "$agent")
    lines0=$(grep -c '^hushmon_agent,' "$OUT/agent_full_node.lp")
    sleep "$run_s"
    stat=$(cpu_ns "$agent")
    kill "$agent" 2>/dev/null; wait "$agent" 2>/dev/null
    kill "${spin[@]}" 2>/dev/null; wait "${spin[@]}" 2>/dev/null
    local figures
    if ! figures=$("$SYS_PY" - "$OUT/agent_full_node.lp" "$period_ms" "$stat0" "$stat" \
        "$lines0" <<'EOF'
import re, statistics, sys
lp, period_ms, cpu0_ns, cpu_ns, lines0 = sys.argv[1:]
period_ms, lines0 = int(period_ms), int(lines0)
lines = [l for l in open(lp) if l.startswith("hushmon_agent,")]
if len(lines) < 3:
    sys.exit(f"only {len(lines)} samples written")
def field(line, key):
    m = re.search(rf"[ ,]{key}=([0-9.]+)", line)
    return float(m.group(1)) if m else float("nan")
cycle_us = [field(l, "cpu_us") for l in lines[1:]]
jitter_us = sorted(field(l, "jitter_us") for l in lines[1:])
samples = len(lines)
# all threads, on-CPU time, over the samples written in between
between = samples - lines0
if not (cpu_ns and cpu0_ns and between > 0):
    sys.exit("the agent's CPU time could not be read")
process_us = (int(cpu_ns) - int(cpu0_ns)) / 1e3 / between
per_sample = max(process_us, statistics.median(cycle_us))
import json
print(json.dumps({
    "period_ms": period_ms, "samples": samples,
    "cpu_us_per_sample_process": round(process_us, 1),
    "cpu_us_per_cycle_median": round(statistics.median(cycle_us), 1),
    "jitter_us_median": jitter_us[len(jitter_us) // 2],
    "jitter_us_max": jitter_us[-1],
    # A synchronized job waits for its slowest rank: at worst the agent's
    # CPU time per period lands on one rank's core and delays them all.
    "added_delay_pct_bound": round(100 * per_sample / (period_ms * 1000), 5),
    "goal_pct": 0.01,
}))
EOF
    ); then
        record $name failed "$(tail -1 "$OUT/agent_full_node.err")" "{}" "$(elapsed "$t0")"; return
    fi
    record $name ran "" "$figures" "$(elapsed "$t0")"
}

# ---- 2: the nats sink against the spool sink -------------------------------

part_sink_cost() {
    local name=sink_cost t0; t0=$(date +%s)
    [ "$AGENT_OK" = 1 ] || { record $name skipped "$AGENT_WHY"; return; }
    [ -n "$NATS_SERVER" ] || { record $name skipped "no nats-server on the PATH"; return; }
    [ -n "$PY" ] || { record $name skipped "no Python that imports hushmon"; return; }
    "$PY" -c 'import nats' 2>/dev/null || { record $name skipped "$PY lacks nats-py"; return; }
    local args=(--sinks-only --period-ms 1000 --duration-s 15 --rounds 3)
    [ "$SHORT" = 1 ] && args=(--sinks-only --period-ms 100 --duration-s 1 --rounds 1)
    if ! HUSHMON_BIN="$BIN" timeout "${BUDGET_S[2]}" "$PY" bench/bench_agent_cost.py "${args[@]}" \
        --json "$OUT/sink_cost.raw.json" >"$OUT/sink_cost.out" 2>&1; then
        record $name failed "bench_agent_cost.py: $(tail -1 "$OUT/sink_cost.out")" "{}" "$(elapsed "$t0")"
        return
    fi
    local figures
    figures=$("$SYS_PY" -c '
import json, sys
s = json.load(open(sys.argv[1]))["sinks"]
print(json.dumps({"period_ms": s["period_ms"], "rounds": s["rounds"],
    "spool_cpu_us_per_sample": round(s["cpu_us_per_sample"]["spool"], 1),
    "nats_cpu_us_per_sample": round(s["cpu_us_per_sample"]["nats"], 1),
    "nats_over_spool": round(s["ratio"], 3), "goal_ratio": 1.10}))' "$OUT/sink_cost.raw.json")
    record $name ran "" "$figures" "$(elapsed "$t0")"
}

# ---- 3: an NVML reading while the GPU works --------------------------------

part_nvml_under_load() {
    local name=nvml_under_load t0; t0=$(date +%s)
    [ -n "$GPU" ] || { record $name skipped "$GPU_WHY"; return; }
    [ "$AGENT_OK" = 1 ] || { record $name skipped "$AGENT_WHY"; return; }
    local load_s=$(( ${BUDGET_S[3]} - 15 )) loader="" load=""
    for p in "$SYS_PY" ${PY:+"$PY"}; do
        if "$p" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
            loader="$p"; break
        fi
    done
    if [ -n "$loader" ]; then
        "$loader" - "$load_s" <<'EOF' >"$OUT/nvml_load.out" 2>&1 &
import sys, time, torch
end = time.monotonic() + float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
while time.monotonic() < end:
    for _ in range(20):
        b = a @ a
    torch.cuda.synchronize()
print("products done")
EOF
        load=$!
        sleep 8  # clocks and power ramp up
    fi
    "$AGENT" --once --sink stdout --sources gpu_nvidia >"$OUT/nvml.lp" 2>"$OUT/nvml.err"
    nvidia-smi --query-gpu=utilization.gpu,power.draw,temperature.gpu,clocks.sm \
        --format=csv,noheader,nounits >"$OUT/nvml.smi" 2>&1
    [ -n "$load" ] && { kill "$load" 2>/dev/null; wait "$load" 2>/dev/null; }
    local figures
    if ! figures=$("$SYS_PY" - "$OUT/nvml.lp" "$OUT/nvml.smi" "${loader:+torch bf16 8192^3 matmul loop}" <<'EOF'
import json, re, sys
lp, smi, load = sys.argv[1:]
gpu = [l for l in open(lp) if l.startswith("gpu,")]
if not gpu:
    sys.exit("the agent wrote no gpu line")
def f(key):
    m = re.search(rf"[ ,]{key}=([0-9.eE+-]+)", gpu[0])
    return float(m.group(1)) if m else None
def num(text):
    try:
        return float(text)
    except ValueError:
        return None  # "[N/A]": the driver does not report it
util, power, temp, sm = (num(x.strip()) for x in (open(smi).readline().split(",") + [""] * 4)[:4])
print(json.dumps({"load": load or "none (no PyTorch with CUDA): an idle reading",
    "agent_sm_pct": f("sm_pct"), "agent_power_w": f("power_w"), "agent_temp_c": f("temp_c"),
    "agent_sm_clock_mhz": f("sm_clock_mhz"), "nvidia_smi_util_pct": util,
    "nvidia_smi_power_w": power, "nvidia_smi_temp_c": temp,
    "nvidia_smi_sm_clock_mhz": sm, "gpus": len(gpu)}))
EOF
    ); then
        record $name failed "$(tail -1 "$OUT/nvml.err")" "{}" "$(elapsed "$t0")"; return
    fi
    record $name ran "" "$figures" "$(elapsed "$t0")"
}

# ---- 4: hushmon-bench accuracy at the node's core count --------------------

part_bench_accuracy() {
    local name=bench_accuracy t0; t0=$(date +%s)
    [ -n "$MPIRUN" ] || { record $name skipped "no mpirun on the PATH"; return; }
    [ -x "$BIN/hushmon-bench" ] || { record $name skipped "$BIN/hushmon-bench not built"; return; }
    local np="$CORES"
    [ "$SHORT" = 1 ] && np=2
    if ! OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout "${BUDGET_S[4]}" \
        "$MPIRUN" "${MPI_ARGS[@]}" -np "$np" "$BIN/hushmon-bench" \
        --op waitpatternup,waitpatternnull --method sync --json "$OUT/bench.raw.json" \
        >"$OUT/bench.out" 2>&1; then
        record $name failed "mpirun -np $np hushmon-bench: $(tail -1 "$OUT/bench.out")" "{}" \
            "$(elapsed "$t0")"
        return
    fi
    local figures
    figures=$("$SYS_PY" - "$OUT/bench.raw.json" <<'EOF'
import json, sys
res = {r["op"]: r for r in json.load(open(sys.argv[1]))["results"]}
up, null = res["waitpatternup"], res["waitpatternnull"]
true_s = up["nprocs"] * 1e-6  # rank i waits (i+1) us: the slowest n us
def ns(s):
    return round(s * 1e9, 1)
print(json.dumps({"ranks": up["nprocs"], "true_time_us": up["nprocs"],
    "up_local_error_ns": ns(up["mean"] - true_s),
    "up_global_error_ns": ns(up["global_mean"] - true_s),
    "null_local_ns": ns(null["mean"]), "null_global_ns": ns(null["global_mean"]),
    "clock_valid": up["clock_valid"], "drift_at_end_ns": ns(up["delta_final_s"]),
    "valid_of_total": f"{up['n_valid']}/{up['n_total']}"}))
EOF
    )
    record $name ran "" "$figures" "$(elapsed "$t0")"
}

# ---- 5: what kernel multiplexing of the counters costs a job ---------------

part_mux_overhead() {
    local name=mux_overhead t0; t0=$(date +%s)
    [ "$PMU" = 1 ] || { record $name skipped "no PMU: $PMU_HOW"; return; }
    [ -n "$MPIRUN" ] || { record $name skipped "no mpirun on the PATH"; return; }
    [ -n "$PY" ] || { record $name skipped "no Python that imports hushmon"; return; }
    local runs=5
    [ "$SHORT" = 1 ] && runs=2
    if ! HUSHMON_BIN="$BIN" timeout "${BUDGET_S[5]}" "$PY" -m hushmon.cli overhead --kernels cg \
        --config "1-$CORES-S" --runs "$runs" --modes none,hushmon,hushmon_pmu \
        --out "$OUT/overhead" --json "$OUT/overhead.raw.json" >"$OUT/overhead.out" 2>&1; then
        record $name failed "hushmon overhead: $(tail -1 "$OUT/overhead.out")" "{}" "$(elapsed "$t0")"
        return
    fi
    local figures
    figures=$("$SYS_PY" - "$OUT/overhead.raw.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
out = {"runs_per_mode": doc["settings"]["runs"]}
for cell in doc["analysis"]["slowdowns"]:
    # the median's interval: robust to one disturbed run
    out[f'{cell["mode"]}_{cell["kernel"]}_{cell["config"]}_median_slowdown_pct'] = (
        f'{cell["median_pct"]:.2f} [{cell["median_low"]:.2f}, {cell["median_high"]:.2f}]')
for use in doc.get("agent_usage", []):
    out[f'{use["mode"]}_cpu_pct_of_one_cpu'] = round(use["cpu_pct"], 3)
out.update({f"note{i}": n for i, n in enumerate(doc.get("notes", [])[:1])})
print(json.dumps(out))
EOF
    )
    record $name ran "" "$figures" "$(elapsed "$t0")"
}

part_agent_full_node
part_sink_cost
part_nvml_under_load
part_bench_accuracy
part_mux_overhead

# ---- one JSON, one Markdown table ------------------------------------------

"$SYS_PY" - "$OUT" "$(elapsed "$START_S")" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import json, sys
from pathlib import Path
out, seconds, load_end = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
machine = json.loads((out / "machine.json").read_text())
machine["loadavg_end"] = load_end
order = ["agent_full_node", "sink_cost", "nvml_under_load", "bench_accuracy", "mux_overhead"]
parts = [json.loads((out / "parts" / f"{n}.json").read_text()) for n in order]
doc = {"machine": machine, "seconds": seconds, "parts": parts}
(out / "device_check.json").write_text(json.dumps(doc, indent=1) + "\n")
def figures(p):
    return "; ".join(f"{k} {v}" for k, v in p["figures"].items()) or "-"
lines = [
    f"Machine: {machine['host']}, {machine['cores']} cores ({machine['cpu_model']}), "
    f"{machine['memory_gib']} GiB; GPU: {machine['gpu'] or 'none (' + machine['gpu_why'] + ')'}; "
    f"PMU: {'yes' if machine['pmu'] else 'no'} ({machine['pmu_how']}); "
    f"load {machine['loadavg_start']} -> {load_end}; {seconds:.0f} s"
    + (" (--short)" if machine["short"] else ""),
    "",
    "| check | status | figures or why not |",
    "|---|---|---|",
]
for p in parts:
    lines.append(f"| {p['part']} | {p['status']} ({p['seconds']:.0f} s) | "
                 f"{figures(p) if p['status'] == 'ran' else p['why']} |")
(out / "device_check.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(1 if any(p["status"] == "failed" for p in parts) else 0)
EOF
