#!/usr/bin/env bash
# Builds ldpsql and its built-in encoder plugins into bin/ (the plugins must sit beside the ldpsql binary,
# or in $LDPSQL_PLUGIN_DIR, to be registered at start).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -o bin/ldpsql-plugin-identity ./plugins/builtin/identity
go build -o bin/ldpsql-plugin-pca ./plugins/builtin/pca
go build -o bin/ldpsql ./cmd/ldpsql
