#!/usr/bin/env bash
# Static check of what git tracks: no file over 1 MiB and no executable
# binary (ELF, Mach-O, PE, or any executable that is not a text script).
# Build outputs belong in _output/ or the cache, never in the repository.
# Exit 1 and name each offender.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((1024 * 1024))
bad=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue # deleted in the work tree, or a submodule
  size=$(stat -c %s -- "$f")
  if [ "$size" -gt "$limit" ]; then
    echo "tracked file over 1 MiB: $f ($size bytes)" >&2
    bad=1
    continue
  fi
  magic=$(head -c 4 -- "$f" | od -An -tx1 | tr -d ' \n')
  case $magic in
  7f454c46 | cafebabe | feedface | feedfacf | cefaedfe | cffaedfe | 4d5a*)
    echo "tracked executable binary: $f" >&2
    bad=1
    continue
    ;;
  esac
  if [ -x "$f" ] && [ "$(head -c 2 -- "$f")" != '#!' ]; then
    echo "tracked executable that is not a script: $f" >&2
    bad=1
  fi
done < <(git ls-files -z)
exit "$bad"
