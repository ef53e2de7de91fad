#!/usr/bin/env bash
# Mutation testing of the launcher's policy modules with cosmic-ray, on a throw-away copy of
# the working tree (cosmic-ray mutates files in place). Not part of CI: it takes a while.
#   tools/mutation.sh [CONFIG]   # prints the surviving mutants (and keeps the session db);
#                                # CONFIG: tools/mutation.toml unless given
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-$repo/.venv/bin/python}"
config="${1:-tools/mutation.toml}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git -C "$repo" ls-files -z | (cd "$repo" && xargs -0 cp -P --parents -t "$work")
cd "$work"
export PYTHONPATH="$work/src:$work"  # the copy, not the installed checkout, is what is tested
export PATH="$(dirname "$python"):$PATH"  # the test command's `python` is the project's
"$python" -m cosmic_ray.cli init "$config" session.sqlite
"$(dirname "$python")/cr-filter-operators" session.sqlite "$config"
"$python" -m cosmic_ray.cli baseline "$config"
"$python" -m cosmic_ray.cli exec "$config" session.sqlite
"$python" -m cosmic_ray.tools.survival_rate session.sqlite || true
"$python" -m cosmic_ray.tools.report --show-output --surviving-only session.sqlite || \
    cr-report --surviving-only session.sqlite
cp session.sqlite "$repo/tools/mutation-session.sqlite"
