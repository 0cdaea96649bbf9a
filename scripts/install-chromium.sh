#!/usr/bin/env bash
# Installs Debian's Chromium for the browser tests (test/explorer.test.ts). playwright-core
# drives it; Playwright's own browser download cannot work here (no internet, only the package
# registries), so the browser comes from apt. Idempotent: does nothing when it is already there.
set -euo pipefail

if [[ -x /usr/bin/chromium ]]; then
  exit 0
fi

# Root needs no sudo (CI and the dev machines run as root); anyone else does.
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium
