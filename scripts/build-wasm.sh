#!/usr/bin/env bash
# Builds the browser client (client/wasm) into bin/wasm: client.wasm and Go's wasm_exec.js loader,
# beside the example page examples/browser/index.html.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin/wasm
GOOS=js GOARCH=wasm go build -o bin/wasm/client.wasm ./client/wasm
root="$(go env GOROOT)"
cp "$root/lib/wasm/wasm_exec.js" bin/wasm/ 2>/dev/null || cp "$root/misc/wasm/wasm_exec.js" bin/wasm/
cp examples/browser/index.html bin/wasm/
echo "built bin/wasm (client.wasm, wasm_exec.js, index.html)" >&2
