#!/usr/bin/env bash
# Builds the DocC catalog of the ObjectGraph module (Sources/ObjectGraph/ObjectGraph.docc) into
# .build/docs (a static website: serve the directory, open /documentation/objectgraph), and
# fails on any DocC warning: a symbol link in a doc comment or an article that names nothing,
# an ambiguous one, a parameter documented under the wrong name.
#
# Uses the module the debug build made (`swift build` or `swift test` first) and the toolchain's
# own `swift symbolgraph-extract` and `docc`, so it needs no plugin and no network.
set -euo pipefail
cd "$(dirname "$0")/.."

debug=.build/debug
if [[ ! -f $debug/Modules/ObjectGraph.swiftmodule ]]; then
    echo "build-docs: no $debug/Modules/ObjectGraph.swiftmodule; run 'swift build' first" >&2
    exit 1
fi
triple=$(swift -print-target-info | sed -n 's/.*"unversionedTriple": "\(.*\)".*/\1/p' | head -n 1)
graphs=.build/docs-symbol-graphs
rm -rf "$graphs" .build/docs
mkdir -p "$graphs"

# The C modules ObjectGraph imports: the system libraries' maps in Sources, the C targets' maps
# the build generated.
args=(-I "$debug/Modules" -I Sources/CLZ4 -I Sources/CNATS)
for map in "$debug"/*.build/module.modulemap; do
    [[ $map == *-tool.build/* ]] && continue
    args+=(-Xcc "-fmodule-map-file=$map")
done

swift symbolgraph-extract -module-name ObjectGraph -target "$triple" -minimum-access-level public \
    -output-dir "$graphs" "${args[@]}"
docc convert Sources/ObjectGraph/ObjectGraph.docc \
    --additional-symbol-graph-dir "$graphs" \
    --fallback-display-name ObjectGraph --fallback-bundle-identifier org.objectgraph.ObjectGraph \
    --transform-for-static-hosting --warnings-as-errors \
    --output-path .build/docs
echo "build-docs: .build/docs"
