#!/usr/bin/env bash
# Runs a command with no network but the loopback interface (a new network namespace, as
# root), and fails if its output shows libtpu querying the cloud metadata server, or shows no
# line of libtpu's at all (then the check would prove nothing: run pytest with
# --capture=sys, so that what libtpu writes to the process's stderr reaches this log).
# Where namespaces are not permitted the command runs as is, and the log checks still apply.
set -uo pipefail
log=$(mktemp)
if unshare -n true 2>/dev/null; then
  unshare -n bash -c 'ip link set lo up 2>/dev/null; exec "$@"' _ "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
else
  echo "tpu/offline.sh: no network namespace here; running with the network" >&2
  "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
fi
if grep -E "Failed to get TPU metadata|metadata.google.internal" "$log" >/dev/null; then
  echo "tpu/offline.sh: libtpu queried the cloud metadata server (see above)" >&2
  status=1
elif ! grep -E "TPU accelerator type|libtpu" "$log" >/dev/null; then
  echo "tpu/offline.sh: no line of libtpu's in the log: was it loaded, is output captured?" >&2
  status=1
fi
rm -f "$log"
exit "$status"
