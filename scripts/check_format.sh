#!/usr/bin/env bash
# Fails, listing the files, when a tracked C++ source differs from what
# clang-format (the checked-in .clang-format, clang-format 14) makes of it.
# Fix with: git ls-files '*.cc' '*.h' | xargs clang-format-14 -i
set -euo pipefail
cd "$(dirname "$0")/.."
CF=$(command -v clang-format-14 || command -v clang-format || true)
if [[ -z $CF ]]; then
  echo "check_format: clang-format-14 missing (scripts/setup.sh installs it)" >&2
  exit 1
fi
bad=()
while IFS= read -r f; do
  if ! "$CF" --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done < <(git ls-files '*.cc' '*.h')
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "check_format: not clang-formatted: ${bad[*]}" >&2
  echo "  fix: git ls-files '*.cc' '*.h' | xargs $CF -i" >&2
  exit 1
fi
echo "check_format: $(git ls-files '*.cc' '*.h' | wc -l) files formatted"
