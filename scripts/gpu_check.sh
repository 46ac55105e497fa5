#!/usr/bin/env bash
# GPU check: on a CUDA machine, with no network, within a time budget that every step's limit fits in (the limits
# add up to 540 s, 9 minutes, without vLLM and 1200 s with it; --plan prints them):
#   0. preflight (scripts/gpu_preflight.py): list what the check needs and what is missing, install what is missing
#      into a private folder (from build/gpu-wheelhouse/ when present, else the package index), check the imports;
#   1. base          the tiny smoke base model, built on the fly (nothing is downloaded);
#   2. gpu_tests     tests/test_gpu.py: HF on CUDA vs CPU; vLLM vs HF; RL steps with vLLM weight sync;
#   3. rl_loop_hf    the RL loop on CUDA in bfloat16 compute at lr 1e-6 (float32 master weights must all move);
#   4. trl_hf        the TRL path (helpers.train_trl, 2 rollout batches) on CUDA, the same checks;
#   5. benchmark     benchmarks/rollout_vllm.py: vLLM vs HF rollout tokens/s and decode bandwidth;
#   6. rl_loop_vllm, trl_vllm   with vllm installed: the RL loop with model.backend=vllm, TRL with its colocated vLLM;
#   7. qwen3_4b      optional (--qwen3, or named in --steps): when Qwen/Qwen3-4B is complete in the local Hugging
#                    Face cache, one FrozenLake rollout batch and one RL update of the real model, times and peak GPU
#                    memory in qwen3_4b.json (GPU_CHECK_QWEN3=FOLDER names another local copy); when it is not
#                    cached the step is SKIPPED with the reason, which does not change the exit status.
# A box with only torch, transformers and accelerate is enough: the preflight brings the rest (gymnasium, pandas,
# pytest, trl, datasets); without vllm the vLLM parts are skipped and the summary says so. vLLM engines are built
# with enforce_eager=True (KIT_VLLM_ENFORCE_EAGER=1): no compilation or CUDA-graph capture inside the budget.
#
#   scripts/gpu_check.sh                      # from anywhere; uses .venv/bin/python if present, else python3 (python)
#   scripts/gpu_check.sh --no-vllm            # the HF-backend and TRL parts only (even where vllm is installed)
#   scripts/gpu_check.sh --steps base,gpu_tests,rl_loop_hf,trl_hf --out results/gpu-check
#   scripts/gpu_check.sh --qwen3              # the default steps, then qwen3_4b (if Qwen3-4B is cached)
#   scripts/gpu_check.sh --plan               # print the steps, their limits and the budget; run nothing
#   scripts/gpu_check.sh --preflight-only     # only step 0 (no GPU needed)
#   PY=/opt/conda/bin/python GPU_CHECK_WHEELHOUSE=/scratch/gpu-wheelhouse scripts/gpu_check.sh
#
# Environment: PY (the interpreter), GPU_CHECK_BUDGET (seconds for steps 1-7; default: the sum of the selected steps'
# limits, and never less), GPU_CHECK_WHEELHOUSE, GPU_CHECK_SITE (the private install folder), GPU_CHECK_OUT (= --out).
# Exit status: 0 every step passed, vLLM included; 1 a step failed; 2 no CUDA device (after the preflight's
# --why-no-cuda: torch's CUDA build, the driver, the cause) or bad arguments; 3-5 the preflight failed (3 packages
# missing and not installable, 4 an import failed, 5 torch missing, vllm with --vllm, or Python older than 3.11); 6 every step that ran passed but the vLLM steps were skipped (vllm not installed, or --no-vllm: the
# gpu/paper profiles' default backend was not checked); 8 nothing failed but a TRL step had no learning signal
# (every task group of every rollout batch had one reward: nothing had to move; run it again). When several hold,
# a failure (1) wins over no signal (8), which wins over vLLM skipped (6); the summary's last line states every one
# of the three that holds, whichever decided the status.
set -u
CALLER=$(pwd)
# abs PATH: a path the caller gave, made absolute against the caller's folder (the script works from the repo root)
abs() { case "$1" in /*|"") printf '%s' "$1" ;; */*|.*) printf '%s/%s' "$CALLER" "$1" ;; *) printf '%s' "$1" ;; esac; }
PY=$(abs "${PY:-}")
[ -n "${GPU_CHECK_WHEELHOUSE:-}" ] && export GPU_CHECK_WHEELHOUSE="$(abs "$GPU_CHECK_WHEELHOUSE")"
[ -n "${GPU_CHECK_SITE:-}" ] && GPU_CHECK_SITE="$(abs "$GPU_CHECK_SITE")"
cd "$(dirname "$0")/.."
REPO=$(pwd)
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; elif command -v python3 >/dev/null; then PY=python3; else PY=python; fi
fi

ALL_STEPS=(base gpu_tests rl_loop_hf trl_hf benchmark rl_loop_vllm trl_vllm qwen3_4b)
VLLM_STEPS=" rl_loop_vllm trl_vllm "
# limit NAME: the step's time limit in seconds; steps that start a vLLM engine get more when vLLM is in use.
limit() {
  case "$1:$USE_VLLM" in
    base:*) echo 120 ;;  # a cold build: first imports without bytecode (the preflight installs with --no-compile)
    gpu_tests:0) echo 150 ;;  gpu_tests:1) echo 360 ;;
    rl_loop_hf:*) echo 60 ;;
    trl_hf:*) echo 90 ;;
    benchmark:0) echo 120 ;; benchmark:1) echo 240 ;;
    rl_loop_vllm:*) echo 150 ;;
    trl_vllm:*) echo 180 ;;
    qwen3_4b:*) echo 360 ;;
  esac
}
KILL_GRACE=10  # timeout --kill-after: the deadline allows it once per step, so a killed step costs later ones nothing

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; }  # the header comment
PLAN=0; PREFLIGHT_ONLY=0; QWEN3=0; VLLM_MODE=auto; STEPS_ARG=""; OUT="$(abs "${GPU_CHECK_OUT:-}")"
while [ $# -gt 0 ]; do
  case "$1" in
    --plan) PLAN=1 ;;
    --preflight-only) PREFLIGHT_ONLY=1 ;;
    --vllm) VLLM_MODE=require ;;
    --no-vllm) VLLM_MODE=skip ;;
    --qwen3) QWEN3=1 ;;
    --steps) shift; STEPS_ARG="${1:-}" ;;
    --steps=*) STEPS_ARG="${1#--steps=}" ;;
    --out) shift; OUT="$(abs "${1:-}")" ;;
    --out=*) OUT="$(abs "${1#--out=}")" ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_check: unknown argument $1 (see --help)"; exit 2 ;;
  esac
  shift
done

case "$VLLM_MODE" in
  require) USE_VLLM=1 ;;
  skip) USE_VLLM=0 ;;
  *) if "$PY" -c "import importlib.util as u, sys; sys.exit(0 if u.find_spec('vllm') else 1)" 2>/dev/null; then
       USE_VLLM=1; else USE_VLLM=0; fi ;;
esac

if [ -n "$STEPS_ARG" ]; then
  IFS=',' read -r -a STEPS <<< "$STEPS_ARG"
  for s in "${STEPS[@]}"; do
    if [[ ! " ${ALL_STEPS[*]} " =~ " $s " ]]; then
      echo "gpu_check: unknown step '$s' (steps: ${ALL_STEPS[*]})"; exit 2
    fi
    if [ "$USE_VLLM" = 0 ] && [[ "$VLLM_STEPS" =~ " $s " ]]; then
      echo "gpu_check: step '$s' needs vllm, which is not in use (not installed, or --no-vllm)"; exit 2
    fi
  done
else
  STEPS=(base gpu_tests rl_loop_hf trl_hf benchmark)
  [ "$USE_VLLM" = 1 ] && STEPS+=(rl_loop_vllm trl_vllm)
  [ "$QWEN3" = 1 ] && STEPS+=(qwen3_4b)
fi
NEED=0
for s in "${STEPS[@]}"; do NEED=$(( NEED + $(limit "$s") )); done
BUDGET=${GPU_CHECK_BUDGET:-$NEED}
if ! [[ "$BUDGET" =~ ^[0-9]+$ ]]; then echo "gpu_check: GPU_CHECK_BUDGET must be seconds, got '$BUDGET'"; exit 2; fi
if [ "$BUDGET" -lt "$NEED" ]; then
  echo "gpu_check: the selected steps' limits add up to ${NEED} s, more than GPU_CHECK_BUDGET=${BUDGET} s;"
  echo "  raise GPU_CHECK_BUDGET or select fewer steps (--steps, --no-vllm; --plan lists them)"
  exit 2
fi
if [ "$PLAN" = 1 ]; then
  echo "gpu_check plan ($([ "$USE_VLLM" = 1 ] && echo "with vLLM" || echo "without vLLM")):"
  for s in "${STEPS[@]}"; do printf '  %-14s limit %4s s\n' "$s" "$(limit "$s")"; done
  echo "  total          limit ${NEED} s; budget ${BUDGET} s (plus ${KILL_GRACE} s of kill grace per step)"
  exit 0
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
SITE="${GPU_CHECK_SITE:-$("$PY" -c 'import sys; sys.path.insert(0, "scripts"); import gpu_preflight as g; print(g.default_site())')}"
export PYTHONPATH="$REPO:$SITE${PYTHONPATH:+:$PYTHONPATH}"  # the kit without `pip install -e .`, and the preflight's packages
export KIT_RESULTS="${KIT_RESULTS:-$WORK/results}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export TRL_EXPERIMENTAL_SILENCE=1 PYTHONUNBUFFERED=1 KIT_VLLM_ENFORCE_EAGER=1

echo "== preflight =="
T0=$(date +%s)
PREFLIGHT_VLLM=$([ "$USE_VLLM" = 1 ] && echo "$VLLM_MODE" || echo skip)
[ "$PREFLIGHT_VLLM" = auto ] && PREFLIGHT_VLLM=require  # auto found vllm installed: its imports must work
timeout 900 "$PY" scripts/gpu_preflight.py --install --site "$SITE" --vllm "$PREFLIGHT_VLLM" 2>&1 | tee "$WORK/preflight.log"
PRC=${PIPESTATUS[0]}
PREFLIGHT_S=$(( $(date +%s) - T0 ))
if [ "$PRC" -ne 0 ]; then
  echo "gpu_check: the preflight failed (exit $PRC, ${PREFLIGHT_S} s); nothing else ran. Log: $WORK/preflight.log"
  exit "$PRC"
fi
[ "$PREFLIGHT_ONLY" = 1 ] && { echo "gpu_check: preflight passed in ${PREFLIGHT_S} s"; exit 0; }

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu_check: no CUDA device visible to $PY (torch.cuda.is_available() is False); nothing to check."
  "$PY" scripts/gpu_preflight.py --why-no-cuda  # torch's CUDA build, the driver, the cause and the ways out
  exit 2
fi
DEVICE=$("$PY" -c "import torch; print(torch.cuda.get_device_name(0))")
if [ "$USE_VLLM" = 1 ]; then
  VLLM_NOTE="vllm $("$PY" -c 'import importlib.metadata as m; print(m.version("vllm"))') (engines with enforce_eager=True)"
else
  VLLM_NOTE="vLLM part SKIPPED: $([ "$VLLM_MODE" = skip ] && echo "--no-vllm" || echo "vllm is not installed (pip install -r requirements-gpu.txt)")"
fi
"$PY" - > "$WORK/environment.json" <<'EOF'
import datetime, importlib.metadata as m, json, platform, torch
v = {}
for d in ("torch", "transformers", "accelerate", "trl", "datasets", "vllm", "gymnasium", "pandas", "pytest"):
    try:
        v[d] = m.version(d)
    except m.PackageNotFoundError:
        v[d] = None
print(json.dumps({"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                  "device": torch.cuda.get_device_name(0), "cuda": torch.version.cuda,
                  "python": platform.python_version(), "versions": v}, indent=1))
EOF
echo "gpu_check on $DEVICE with $PY; $VLLM_NOTE; budget ${BUDGET} s; logs in $WORK"

START=$(date +%s)
DEADLINE=$(( START + BUDGET + KILL_GRACE * ${#STEPS[@]} ))
SUMMARY=()
FAILED=0
NO_SIGNAL=0

# step NAME CMD...: run with the step's limit (never past the deadline), log to $WORK/NAME.log.
step() {
  local name=$1; shift
  local lim; lim=$(limit "$name")
  local left=$(( DEADLINE - $(date +%s) ))
  if [ "$left" -lt 20 ]; then
    SUMMARY+=("$(printf '%-14s %-8s %5s s  (limit %s s)' "$name" "NO TIME" 0 "$lim")"); FAILED=1; return 1
  fi
  [ "$lim" -gt "$left" ] && lim=$left
  echo "== $name (limit ${lim} s) =="
  local t0; t0=$(date +%s)
  timeout --kill-after=$KILL_GRACE "$lim" "$@" > "$WORK/$name.log" 2>&1
  local rc=$? status=PASS
  local dt=$(( $(date +%s) - t0 ))
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status=TIMEOUT; FAILED=1
  elif [ $rc -eq 8 ] && [[ "$name" == trl_* ]]; then status=NO-SIGNAL; NO_SIGNAL=1
  elif [ $rc -eq 9 ] && [ "$name" = qwen3_4b ]; then status=SKIPPED  # Qwen3-4B not cached: not a failure
  elif [ $rc -ne 0 ]; then status="FAIL($rc)"; FAILED=1; fi
  tail -n 6 "$WORK/$name.log"
  SUMMARY+=("$(printf '%-14s %-8s %5s s  (limit %s s)' "$name" "$status" "$dt" "$lim")")
  return $rc
}

PYTEST_MARK=()
[ "$USE_VLLM" = 0 ] && PYTEST_MARK=(-m "not vllm")
for s in "${STEPS[@]}"; do
  case "$s" in
    base) step base "$PY" -c "from helpers import base_model, config; print(base_model.path_of(config.load('smoke')))" ;;
    gpu_tests) step gpu_tests "$PY" -m pytest -q -rs -p no:cacheprovider ${PYTEST_MARK[@]+"${PYTEST_MARK[@]}"} tests/test_gpu.py ;;
    rl_loop_hf) step rl_loop_hf "$PY" scripts/gpu_check_steps.py rl-loop --device cuda --backend hf --dtype bfloat16 ;;
    trl_hf) step trl_hf "$PY" scripts/gpu_check_steps.py trl --device cuda --dtype bfloat16 ;;
    benchmark)
      BENCH_VLLM=()
      [ "$USE_VLLM" = 0 ] && BENCH_VLLM=(--skip-vllm)
      step benchmark "$PY" benchmarks/rollout_vllm.py --tasks 16 --samples 8 --enforce-eager ${BENCH_VLLM[@]+"${BENCH_VLLM[@]}"} \
        --json "$WORK/benchmark.json" ;;
    rl_loop_vllm) step rl_loop_vllm "$PY" scripts/gpu_check_steps.py rl-loop --device cuda --backend vllm --dtype bfloat16 ;;
    trl_vllm) step trl_vllm "$PY" scripts/gpu_check_steps.py trl --device cuda --dtype bfloat16 --vllm ;;
    qwen3_4b) step qwen3_4b "$PY" scripts/gpu_check_steps.py qwen3 --device cuda --dtype bfloat16 \
        --json "$WORK/qwen3_4b.json" ;;
  esac
done

# the verdict: the exit status by precedence (failure 1 > no learning signal 8 > vLLM skipped 6 > 0), and one line
# that states each of these facts that holds, whichever decided the status
NOTE_SIGNAL="a TRL step had NO-SIGNAL (every task group had one reward: nothing had to move; run it again)"
if [ "$FAILED" = 1 ]; then RC=1; VERDICT="a step FAILED"
elif [ "$NO_SIGNAL" = 1 ]; then RC=8; VERDICT="nothing failed, but $NOTE_SIGNAL"
elif [ "$USE_VLLM" = 0 ]; then RC=6; VERDICT="passed WITHOUT vLLM"
else RC=0; VERDICT="every step passed, vLLM included"; fi
VERDICT="gpu_check (exit $RC): $VERDICT"
[ "$RC" = 1 ] && [ "$NO_SIGNAL" = 1 ] && VERDICT+="; also $NOTE_SIGNAL"
[ "$USE_VLLM" = 0 ] && VERDICT+="; $VLLM_NOTE"
{
  echo "================ gpu_check summary ($DEVICE, $(date -u +%Y-%m-%dT%H:%M:%SZ)) ================"
  printf '%-14s %-8s %5s s\n' preflight PASS "$PREFLIGHT_S"
  printf '%s\n' ${SUMMARY[@]+"${SUMMARY[@]}"}
  grep -h -E "passed|failed|skipped|error" "$WORK/gpu_tests.log" 2>/dev/null | tail -n 1
  grep -h -E "^(rl-loop|trl): (weights|.*outcome)" "$WORK"/rl_loop_*.log "$WORK"/trl_*.log 2>/dev/null
  grep -h -E "gen tokens/s|vLLM / HF|vLLM part" "$WORK/benchmark.log" 2>/dev/null
  grep -h -E "^qwen3: " "$WORK/qwen3_4b.log" 2>/dev/null
  echo "$VLLM_NOTE"
  echo "logs: $WORK   steps $(( $(date +%s) - START )) s of a ${BUDGET} s budget"
  echo "$VERDICT"
} | tee "$WORK/summary.txt"
if [ -n "$OUT" ]; then
  mkdir -p "$OUT" && cp "$WORK"/*.log "$WORK"/summary.txt "$WORK"/environment.json "$OUT"/ \
    && { [ ! -f "$WORK/benchmark.json" ] || cp "$WORK/benchmark.json" "$OUT"/; } \
    && { [ ! -f "$WORK/qwen3_4b.json" ] || cp "$WORK/qwen3_4b.json" "$OUT"/; } && echo "copied to $OUT"
fi
exit "$RC"
