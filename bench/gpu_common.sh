# Shared by the GPU call scripts (sourced, not run): the set-up, the gpu-marked tests beside
# the cuda fuzz, and the summary of both.

# Install the carried wheels (.whl: lark, filecheck) and point Python at them and this tree.
gpu_setup() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || return 1
  export FUSEJIT_CACHE_DIR=/tmp/fusejit-cache
}

# gpu_begin WORK: a call's start: sets out (OUT, default gpu-out) and work (WORK), makes them
# (and WORK/fuzz), installs the wheels (gpu_setup) and writes the card's name to out/card.txt.
gpu_begin() {
  out=${OUT:-gpu-out}; work=$1
  mkdir -p "$out" "$work/fuzz"
  gpu_setup || return 1
  nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
}

# tests_beside_fuzz WORK FUZZ_SECONDS PROCS SEED_BASE TESTS_TIMEOUT [PYTEST_K]
# The gpu-marked tests (all but PYTEST_K's exclusions: the exhaustive exp test and the
# no-synchronization timing test by default) beside PROCS cuda fuzz processes, the last 3 of
# them through fj.jit (seeds SEED_BASE+1 ...); logs under WORK. Waits for all of them.
tests_beside_fuzz() {
  local work=$1 fuzz_s=$2 procs=$3 seed=$4 tests_s=$5
  local k=${6:-"not every_input and not no_device_synchronization"} i mode
  mkdir -p "$work/fuzz"
  timeout "$tests_s" python3 -m pytest -m gpu -q -p no:cacheprovider tests -k "$k" \
    > "$work/gpu-tests.log" 2>&1 &
  for i in $(seq 1 "$procs"); do
    mode=""; [ "$i" -gt $((procs - 3)) ] && mode="--jit"
    timeout $((fuzz_s + 40)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" \
      --seed $((seed + i)) $mode --out "$work/fuzz/failures" --max-failures 3 \
      > "$work/fuzz/fuzz-$i.log" 2>&1 &
  done
  wait
}

# fuzz_summary WORK: the tests' last lines and failures, the fuzz's programs by path, any fuzz
# line with a failure, the failures kept, and align_fuzz's lines.
fuzz_summary() {
  local work=$1
  grep -E "passed|failed" "$work/gpu-tests.log" | tail -2
  grep -E "^FAILED|^ERROR" "$work/gpu-tests.log" | head -20
  grep -h "^fusejit fuzz" "$work"/fuzz/fuzz-*.log | awk '
    { jit = ($0 ~ /--jit/) ? "fj.jit" : "realize"; for (i = 1; i <= NF; i++) if ($(i+1) == "programs") n[jit] += $i }
    END { for (k in n) print "cuda fuzz programs (" k "):", n[k] }'
  grep -h "^fusejit fuzz" "$work"/fuzz/fuzz-*.log | grep -v "mismatch 0, error 0, crash 0" | head -5
  ls "$work/fuzz/failures" 2>/dev/null | head
  # the align_fuzz processes' last lines, where they ran
  grep -h "^fusejit fuzz" "$work"/fuzz/align-*.log 2>/dev/null
}

# unseen_matmul OUT WORK TAG SEED:COUNT IMPLS BUDGET
# A drawn set of GEMMs (bench_matmul.py --unseen, default tiles) beside the IMPLS peers, its
# results and fusejit's log copied to OUT/matmul-TAG before anything else runs.
unseen_matmul() {
  local out=$1 work=$2 tag=$3 draw=$4 impls=$5 budget=$6
  timeout $((budget + 90)) python3 bench/bench_matmul.py --out "$work/matmul-$tag" --unseen "$draw" \
    --quick --impls "$impls" --budget "$budget" > "$work/matmul-$tag.log" 2>&1
  echo "matmul $tag exit $?"
  mkdir -p "$out/matmul-$tag"
  cp "$work/matmul-$tag"/results.* "$work/matmul-$tag"/fusejit.log "$out/matmul-$tag/" 2>/dev/null
  cut -d'|' -f2-10 "$work/matmul-$tag/results.md" | head -20
}

# align_fuzz WORK SECONDS SEED_BASE [PROCS] [ENV]: PROCS (2) cuda fuzz processes in the
# background with every misaligned float16 GEMM operand copied (FUSEJIT_GEMM_ALIGN=always), or
# with the settings ENV (for example "FUSEJIT_GEMM_PERSISTENT=always FUSEJIT_GEMM_STREAM_K=always":
# every GEMM of two tiles or more stream-K); logs WORK/fuzz/align-*.log
align_fuzz() {
  local work=$1 fuzz_s=$2 seed=$3 procs=${4:-2} settings=${5:-FUSEJIT_GEMM_ALIGN=always} i
  mkdir -p "$work/fuzz"
  for i in $(seq 1 "$procs"); do
    env $settings timeout $((fuzz_s + 40)) python3 -m fusejit fuzz --backend cuda \
      --seconds "$fuzz_s" --seed $((seed + i)) --out "$work/fuzz/failures-align" --max-failures 3 \
      > "$work/fuzz/align-$i.log" 2>&1 &
  done
}

# unseen_suite OUT WORK SEED:COUNT BUDGET: a drawn set of the suite's workloads (suite.py
# --unseen) beside torch.compile and jax.jit, its results copied to OUT/unseen, then its table
# (name, shape, fusejit's kernels and jit, the peers, the ratio) and summary.
unseen_suite() {
  local out=$1 work=$2 draw=$3 budget=$4
  timeout $((budget + 60)) python3 bench/suite.py --out "$work/unseen" --unseen "$draw" \
    --budget "$budget" --impls fusejit,jax,torch > "$work/unseen.log" 2>&1; echo "unseen exit $?"
  mkdir -p "$out/unseen"; cp "$work"/unseen/results.* "$out/unseen/" 2>/dev/null
  grep -A40 "^| workload" "$work/unseen/results.md" | cut -d'|' -f2,4,8,9,10,12,13 | head -30
  grep -A6 "^## Summary" "$work/unseen/results.md"
}

# tests_beside_product_fuzz WORK FUZZ_SECONDS SEED_BASE OUT
# The GEMM, alignment, TF32, row-window and regression tests (gpu-marked) beside four cuda fuzz
# processes that draw matrix products: two at TF32 (one through fj.jit), one at ieee with
# --products, one plain (seeds SEED_BASE+1 ...); then their summary in OUT/gpu-tests-fuzz.txt
# and the logs and failures copied to OUT.
tests_beside_product_fuzz() {
  local work=$1 fuzz_s=$2 seed=$3 out=$4 i=0 mode
  mkdir -p "$work/fuzz"
  timeout $((fuzz_s + 120)) python3 -m pytest -m gpu -q -p no:cacheprovider tests -k \
    "(matmul or gemm or align or tf32 or window or regressions) and not every_input" \
    > "$work/gpu-tests.log" 2>&1 &
  for mode in "--matmul-precision tf32" "--matmul-precision tf32 --jit" "--products" ""; do
    i=$((i + 1))
    timeout $((fuzz_s + 60)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" \
      --seed $((seed + i)) $mode --out "$work/fuzz/failures" --max-failures 3 \
      > "$work/fuzz/fuzz-$i.log" 2>&1 &
  done
  wait
  { grep -E "passed|failed" "$work/gpu-tests.log" | tail -2
    grep -E "^FAILED|^ERROR" "$work/gpu-tests.log" | head -20
    grep -h "^fusejit fuzz" "$work"/fuzz/fuzz-*.log
    ls "$work/fuzz/failures" 2>/dev/null; } | tee "$out/gpu-tests-fuzz.txt"
  cp "$work/gpu-tests.log" "$out/" 2>/dev/null
  [ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
}

# exp_halves OUT NAME TIMEOUT ARGS...: one bench/exp_s18_halves.py run with ARGS, its JSON and
# text as OUT/NAME.json and .txt, its exit status and table lines shown.
exp_halves() {
  local out=$1 name=$2 limit=$3; shift 3
  timeout "$limit" python3 bench/exp_s18_halves.py "$@" --json "$out/$name.json" \
    > "$out/$name.txt" 2>&1
  echo "$name exit $?"; grep -v "^compil" "$out/$name.txt" | grep -v "^    " | tail -30
}

# suite_family OUT WORK NAME BUDGET SUITE_ARGS...: bench/suite.py with SUITE_ARGS beside
# torch.compile and jax.jit within BUDGET seconds, its results and log tail copied to
# OUT/NAME, then its table and summary.
suite_family() {
  local out=$1 work=$2 name=$3 budget=$4; shift 4
  timeout $((budget + 60)) python3 bench/suite.py --out "$work/$name" --budget "$budget" \
    --impls fusejit,jax,torch "$@" > "$work/$name.log" 2>&1; echo "suite $name exit $?"
  mkdir -p "$out/$name"; cp "$work/$name"/results.* "$out/$name/" 2>/dev/null
  tail -5 "$work/$name.log" > "$out/$name/log-tail.txt"
  grep -A40 "^| workload" "$work/$name/results.md" | cut -d'|' -f2-14 | head -40
  grep -A8 "^## Summary" "$work/$name/results.md"
}

# fuzz_report WORK OUT: the last line of every WORK/fuzz/*.log into OUT/fuzz.txt (shown), and
# the failures the fuzz kept copied to OUT.
fuzz_report() {
  local work=$1 out=$2 f
  for f in "$work"/fuzz/*.log; do echo "$f: $(tail -n 1 "$f")"; done | tee "$out/fuzz.txt"
  if [ -d "$work/fuzz/failures" ]; then cp -r "$work/fuzz/failures" "$out/"; fi
}

# coop_jobs WORK FUZZ_S SEED [full]: in the background (the caller waits), the cooperative and
# window gpu tests with the pipelined form on (WORK/tests-pipelined.log; with "full" first as
# shipped, tests-default.log) and the wide-row fuzz with it on (seed SEED + 1,
# WORK/fuzz/rows-pipelined.log; with "full" as shipped too, seed SEED, rows.log).
coop_jobs() {
  local work=$1 fuzz_s=$2 seed=$3 full=${4:-}
  local tests="tests/test_cooperative_rows.py tests/test_row_window.py"
  mkdir -p "$work/fuzz"
  ( if [ -n "$full" ]; then timeout $((fuzz_s + 40)) python3 -m pytest -m gpu -q \
      -p no:cacheprovider $tests > "$work/tests-default.log" 2>&1; fi
    FUSEJIT_COOP_PIPELINE=1 timeout $((fuzz_s + 30)) python3 -m pytest -m gpu -q \
      -p no:cacheprovider $tests > "$work/tests-pipelined.log" 2>&1 ) &
  if [ -n "$full" ]; then timeout $((fuzz_s + 30)) python3 bench/fuzz_rows.py --backend cuda \
    --seconds "$fuzz_s" --seed "$seed" > "$work/fuzz/rows.log" 2>&1 & fi
  FUSEJIT_COOP_PIPELINE=1 timeout $((fuzz_s + 30)) python3 bench/fuzz_rows.py --backend cuda \
    --seconds "$fuzz_s" --seed $((seed + 1)) > "$work/fuzz/rows-pipelined.log" 2>&1 &
}

# coop_correctness WORK OUT FUZZ_S [full]: cuda correctness of the cooperative rows with the
# pipelined form on (FUSEJIT_COOP_PIPELINE=1): their gpu tests, a wide-row fuzz, and a plain
# fuzz; with "full", the default form's tests and wide-row fuzz too. The tests' summaries go
# to OUT/correctness.txt, the fuzz's last lines and failures through fuzz_report.
coop_correctness() {
  local work=$1 out=$2 fuzz_s=$3 full=${4:-} f
  coop_jobs "$work" "$fuzz_s" 20022 "$full"
  timeout $((fuzz_s + 30)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" \
    --seed 20021 --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/plain.log" 2>&1 &
  wait
  for f in "$work"/tests-*.log; do echo "$f: $(grep -E 'passed|failed' "$f" | tail -1)";
    grep -E "^FAILED|^ERROR" "$f" | head -10; done | tee "$out/correctness.txt"
  fuzz_report "$work" "$out"
}

# pack_out OUT: every file under OUT packed into OUT/results.tar.gz and the rest removed (at
# most 8 files come back from a device call: the sixteenth session's third call wrote 14 and
# lost its test summary); unpack here with tar -xzf.
pack_out() {
  local out=$1
  tar -czf /tmp/results.tar.gz -C "$out" . && find "$out" -mindepth 1 -delete \
    && mv /tmp/results.tar.gz "$out/results.tar.gz"
}

# wide_pipeline_suite OUT WORK: the suite's wide softmax and layer norm (fusejit alone) with
# FUSEJIT_COOP_PIPELINE off and on, each in its own process -> OUT/wide-off/, OUT/wide-on/
wide_pipeline_suite() {
  local out=$1 work=$2 pipe name
  for pipe in 0 1; do
    name=wide-$([ $pipe = 1 ] && echo on || echo off)
    FUSEJIT_COOP_PIPELINE=$pipe timeout 75 python3 bench/suite.py --out "$work/$name" --budget 60 \
      --impls fusejit --only "softmax_wide|layer_norm_wide" > "$work/$name.log" 2>&1
    echo "suite $name exit $?"; mkdir -p "$out/$name"; cp "$work/$name"/results.md "$out/$name/"
    grep "_wide" "$work/$name/results.md" | cut -d'|' -f2-8
  done
  true
}

# mode_fuzz WORK SECONDS SEED_BASE MODE...: one cuda fuzz process in the background for each
# MODE (its flags: "--products", "--products --large-plans", ...; seeds SEED_BASE+1 ...);
# logs WORK/fuzz/fuzz-*.log (fuzz_summary reads them)
mode_fuzz() {
  local work=$1 fuzz_s=$2 seed=$3 i=0 mode
  shift 3
  mkdir -p "$work/fuzz"
  for mode in "$@"; do
    i=$((i + 1))
    timeout $((fuzz_s + 40)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" \
      --seed $((seed + i)) $mode --out "$work/fuzz/failures" --max-failures 3 \
      > "$work/fuzz/fuzz-$i.log" 2>&1 &
  done
}
