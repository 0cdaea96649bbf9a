#!/usr/bin/env bash
# Installs promtool, from Debian's prometheus package, for the chart's alerting-rule tests
# (test/chart/alert-rules.test.ts, test/chart/monitoring-queries.test.ts): `promtool check
# rules` parses every rule and dashboard query, `promtool test rules` runs the alerts' unit tests.
# Idempotent: does nothing when promtool is there.
set -euo pipefail

if command -v promtool > /dev/null; then
  exit 0
fi

# Root needs no sudo (CI and the dev machines run as root); anyone else does.
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  sudo=(sudo)
fi

# Only promtool is wanted: the package's Prometheus server must not start (it would listen on
# 9090). Where the machine has no policy-rc.d to say so, one refuses every start for the install.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" > /dev/null
  "${sudo[@]}" chmod 755 "$policy"
  trap '"${sudo[@]}" rm -f "$policy"' EXIT
fi

export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends prometheus
