#!/usr/bin/env bash
# Runs every ldpsql test. It first installs what the tests need and the repository cannot carry:
# the mysql command-line client (Debian package mariadb-client), which the integration tests drive, and
# OpenBLAS (libopenblas-dev), with which scripts/build.sh builds the VLM: the training packages are vetted
# and the VLM's tested with -tags openblas too, so the code behind the published results runs in CI.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v mysql >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "scripts/test.sh: installing mariadb-client (the mysql client the integration tests use)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-client >/dev/null
  else
    echo "scripts/test.sh: the mysql client is missing; install it (apt-get install mariadb-client)" >&2
    echo "or the mysql-client test is skipped (outside CI)" >&2
  fi
fi

have_openblas() { ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so '; }
if ! have_openblas && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "scripts/test.sh: installing libopenblas-dev (the BLAS of the published VLM results)" >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenblas-dev >/dev/null
fi

go vet ./...
if have_openblas; then
  go vet -tags openblas ./training/... ./plugins/...
  # Only the VLM's packages build differently with the tag; the other training packages would rerun as is.
  go test -count=1 -tags openblas ./training/vlm/... ./plugins/builtin/vlm/...
else
  echo "scripts/test.sh: libopenblas-dev is missing (install it: apt-get install libopenblas-dev);" >&2
  echo "the -tags openblas build is not tested" >&2
fi
go test -count=1 ./...  # -count=1: the integration tests build the binary, which the test cache cannot see
