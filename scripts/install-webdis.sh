#!/usr/bin/env bash
# Installs Debian's webdis, the C gateway from HTTP to Redis, for the benchmark's Redis peer
# (`npm run bench -- --stores redis`): the bench starts a webdis of its own on its own
# redis-server and measures `GET /HGETALL/<row hash>` beside kvcrud's v2 get. Without it the bench
# says so and skips the peer. The bench is not run in CI, so CI does not call this. Idempotent:
# does nothing when webdis is there.
set -euo pipefail

if [[ -x /usr/bin/webdis ]]; then
  exit 0
fi

# Root needs no sudo (the dev machines run as root); anyone else does.
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends webdis
