#!/usr/bin/env bash
# Re-make the guide's pictures of the report from the page tests/test_report.py renders of
# the real runs (tests/artifacts/report.html; run that test first), in the same headless
# Chromium: the top of the report, and one section alone (the others hidden by a style).
#   docs/pictures.sh
set -euo pipefail
cd "$(dirname "$0")/.."
page=tests/artifacts/report.html
[ -f "$page" ] || { echo "no $page: ./sitebench test tests/test_report.py -k real_runs" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
shot() {  # shot OUT WIDTHxHEIGHT PAGE
  chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --hide-scrollbars --user-data-dir="$work/profile" --virtual-time-budget=20000 \
    --window-size="${2/x/,}" --screenshot="$PWD/$1" "file://$PWD/$3" 2>/dev/null
}
shot docs/_static/report.png 1400x1150 "$page"
# Chromium reads the copy beside the original (it may not read another user's /tmp).
alone=tests/artifacts/report-pingpong.html
{ echo '<style>body > :not(section):not(script), section:not(#pingpong) {display:none !important}</style>'
  cat "$page"; } > "$alone"
shot docs/_static/report-pingpong.png 1400x560 "$alone"
rm -f "$alone"
