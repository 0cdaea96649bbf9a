#!/usr/bin/env bash
# Installs Debian's redis-server and redis-cli for the Redis store's tests (test/stores/redis,
# the driver conformance suite), which start servers of their own on free ports, and openssl,
# which makes the certificates of the TLS test. Idempotent: does nothing when all are there. A
# Redis the package may start on 6379 is never used by tests.
set -euo pipefail

if [[ -x /usr/bin/redis-server && -x /usr/bin/redis-cli && -x /usr/bin/openssl ]]; then
  exit 0
fi

# Root needs no sudo (CI and the dev machines run as root); anyone else does.
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends redis-server redis-tools openssl
