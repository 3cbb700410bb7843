#!/usr/bin/env bash
set -euo pipefail
src=docs
dest=backup
mkdir -p "$dest"
for f in "$source"/*.txt; do
  cp "$f" "$dest/"
done
echo "backed up to $dest"
