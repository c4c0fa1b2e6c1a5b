#!/usr/bin/env bash
# Copies uPlot (the charting library that report.html inlines) from the npm registry into
# src/train/_uplot/, so that the page needs no network and the package ships it. The version is
# pinned here; `npm pack` checks the tarball against the registry's integrity hash.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=1.6.32
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "uplot@$VERSION" >/dev/null && tar xzf "uplot-$VERSION.tgz")
dest=src/train/_uplot
mkdir -p "$dest"
cp "$tmp/package/dist/uPlot.iife.min.js" "$tmp/package/dist/uPlot.min.css" "$tmp/package/LICENSE" "$dest/"
echo "uplot $VERSION -> $dest"
