#!/usr/bin/env bash
# Regenerates every image in this directory from the built-in demo at its fixed moments
# (70 s in; the Pending view at 3m10s, during the spot capacity outage; the overview at
# 4m20s, when its graphs have four minutes of history and a drift decision waits):
#
#   ./screenshots/generate.sh
#
# Every view in the dark theme (SVG), the overview in every theme (SVG), and the dark
# overview as PNG for the README.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin="${CARGO_TARGET_DIR:-target}/release/karpenter-tui"
export KARPENTER_TUI_CONFIG_DIR="$(mktemp -d)"   # built-in themes only
overview_at=4m20s
for view in nodepools nodes pending disruption events help; do
  "$bin" screenshot --view "$view" --out "screenshots/$view.svg"
done
"$bin" screenshot --view overview --at "$overview_at" --out screenshots/overview.svg
for theme in light high-contrast transparent; do
  "$bin" screenshot --view overview --at "$overview_at" --theme "$theme" \
    --out "screenshots/overview-$theme.svg"
done
"$bin" screenshot --view overview --at "$overview_at" --out screenshots/overview.png
"$bin" screenshot --view disruption --out screenshots/disruption.png
# The circuit breaker holding the bad image's rollout (issue 22), 12 minutes in.
"$bin" --scenario examples/bad-ami-rollout.yaml screenshot --view nodepools --at 12m \
  --out screenshots/breaker.png
