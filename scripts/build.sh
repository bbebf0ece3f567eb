#!/usr/bin/env bash
# Builds ldpsql and its built-in encoder plugins into bin/ (the plugins must sit beside the ldpsql binary,
# or in $LDPSQL_PLUGIN_DIR, to be registered at start).
#
# VLM training and encoding run several times faster with OpenBLAS: when Debian's libopenblas-dev is
# installed (this script installs it when run as root with apt-get), everything is built with
# -tags openblas; otherwise with gonum's pure-Go BLAS.
set -euo pipefail
cd "$(dirname "$0")/.."
have_openblas() { ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so '; }
if ! have_openblas && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "scripts/build.sh: installing libopenblas-dev (fast BLAS for VLM training)" >&2
  (apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenblas-dev >/dev/null) ||
    echo "scripts/build.sh: could not install libopenblas-dev; building with pure-Go BLAS" >&2
fi
tags=()
if have_openblas; then tags=(-tags openblas); fi
mkdir -p bin
go build "${tags[@]}" -o bin/ldpsql-plugin-identity ./plugins/builtin/identity
go build "${tags[@]}" -o bin/ldpsql-plugin-pca ./plugins/builtin/pca
go build "${tags[@]}" -o bin/ldpsql-plugin-vlm ./plugins/builtin/vlm
go build "${tags[@]}" -o bin/ldpsql-plugin-task_aware_linear ./plugins/builtin/task_aware_linear
go build "${tags[@]}" -o bin/ldpsql-plugin-task_aware ./plugins/builtin/task_aware
go build "${tags[@]}" -o bin/ldpsql-plugin-clm ./plugins/builtin/clm
# Pin the built-in plugins' digests into ldpsql, so a replaced plugin binary is refused at start.
pins=""
for p in identity pca vlm task_aware_linear task_aware clm; do
  pins+="${pins:+,}$p:$(sha256sum "bin/ldpsql-plugin-$p" | cut -d' ' -f1)"
done
go build "${tags[@]}" -ldflags "-X github.com/ldpsql/ldpsql/udf.builtinDigests=$pins" -o bin/ldpsql ./cmd/ldpsql
# ldpsql etl runs this binary of its own: Apache Beam and its runners are linked here, not into ldpsql.
# It is built without OpenBLAS: on a cluster it is its own worker, in Beam's Go SDK container
# (debian:bookworm with no libopenblas), and it only encodes, which package sgemm's kernel does as fast.
go build -o bin/ldpsql-etl ./cmd/ldpsql-etl
echo "built bin/ldpsql and its plugins${tags:+ with OpenBLAS}" >&2
