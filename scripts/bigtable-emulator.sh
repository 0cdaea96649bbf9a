#!/usr/bin/env bash
# Runs the Cloud Bigtable emulator in the foreground for local development (npm run emulator).
# It keeps data in memory only: stopping it loses every table.
#   EMULATOR_PORT   port to listen on (default 8086)
#   CBT_EMULATOR    path of the cbtemulator binary (default: the Cloud SDK's)
set -euo pipefail

port=${EMULATOR_PORT:-8086}
binary=${CBT_EMULATOR:-/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator}

if [[ ! -x $binary ]] && command -v gcloud >/dev/null; then
  binary="$(gcloud info --format='value(installation.sdk_root)')/platform/bigtable-emulator/cbtemulator"
fi
if [[ ! -x $binary ]]; then
  echo "No Bigtable emulator at $binary. Install it: gcloud components install bigtable" \
    "(or apt-get install google-cloud-cli-bigtable-emulator), or set CBT_EMULATOR." >&2
  exit 1
fi

echo "Use: export BIGTABLE_EMULATOR_HOST=localhost:$port" >&2
exec "$binary" -host 127.0.0.1 -port "$port"
