#!/usr/bin/env bash
# The small-LM GPU validation (one H200, sized for under 8 minutes including base-model
# training; the plan shrinks the grid if throughput is lower than planned). Writes the JSON
# lines journal, the figure, the report and result.json under $OUT/lm (default isosim-out/lm).
# Needs the lm extra (PyTorch with CUDA). One run on an H200 (428 s) is in paper_figures/lm/gpu-full/.
set -euo pipefail
OUT="${OUT:-isosim-out}"
mkdir -p "$OUT/lm"
PYTHONUNBUFFERED=1 python -m isosim lm validate --device cuda --out "$OUT/lm" --json | tee "$OUT/lm/result.json"
