#!/usr/bin/env bash
# Checks the deployment files (deploy/) with the tools that read them: HAProxy's own configuration
# check, systemd's unit verifier (with the unit's binary path pointed at the build's woolly, which it
# requires to exist; any warning fails too, since the verifier exits 0 on unknown keys and bad values),
# and the Kubernetes manifest against the API's schemas (tests/server/k8s_check.mjs, npm package
# kubernetes-models). Each check must also reject a broken copy, so that a check that cannot fail does
# not pass for one that works. Usage: deploy_check.sh SOURCE_DIR WOOLLY_BINARY.
set -uo pipefail
src=$1
woolly=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
check() { # name, expected (ok|bad), command...
  local name=$1 want=$2
  shift 2
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$want" = ok ] && [ $rc -eq 0 ]; then
    passed=$((passed + 1))
  elif [ "$want" = bad ] && [ $rc -ne 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $name (exit $rc, wanted $want)"
    echo "$out"
  fi
}
quiet_verify() { # systemd-analyze verify, failing on any message
  local out
  out=$(systemd-analyze verify --man=no "$1" 2>&1) || { echo "$out"; return 1; }
  [ -z "$out" ] || { echo "$out"; return 1; }
}

# HAProxy: the file as shipped (its stats socket's folder must exist for the check) ...
sed "s|/run/haproxy/woolly.sock|$tmp/haproxy.sock|" "$src/deploy/haproxy.cfg" > "$tmp/haproxy.cfg"
check "haproxy -c deploy/haproxy.cfg" ok haproxy -c -f "$tmp/haproxy.cfg"
sed 's/balance hdr(X-Session-Id)/balance hdr(X-Session-Id) bogus/' "$tmp/haproxy.cfg" > "$tmp/bad.cfg"
check "haproxy -c rejects a broken copy" bad haproxy -c -f "$tmp/bad.cfg"
grep -q "retry-on conn-failure empty-response" "$src/deploy/haproxy.cfg" ||
  { failed=$((failed + 1)); echo "FAIL: haproxy.cfg does not retry on conn-failure empty-response"; }
grep -q "hash-type consistent" "$src/deploy/haproxy.cfg" ||
  { failed=$((failed + 1)); echo "FAIL: haproxy.cfg does not hash consistently"; }

# systemd: the unit as shipped, with the build's binary
sed "s|/usr/local/bin/woolly|$woolly|" "$src/deploy/woolly.service" > "$tmp/woolly.service"
check "systemd-analyze verify deploy/woolly.service" ok quiet_verify "$tmp/woolly.service"
sed 's/^ProtectSystem=strict/ProtectSystem=stricter/' "$tmp/woolly.service" > "$tmp/bad.service"
check "systemd-analyze verify rejects a broken copy" bad quiet_verify "$tmp/bad.service"
# its drain fits inside systemd's stop timeout
drain=$(sed -n 's/.*--drain-timeout \([0-9]*\).*/\1/p' "$src/deploy/woolly.service")
stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)$/\1/p' "$src/deploy/woolly.service")
[ -n "$drain" ] && [ -n "$stop" ] && [ "$stop" -gt "$drain" ] ||
  { failed=$((failed + 1)); echo "FAIL: TimeoutStopSec ($stop) must exceed --drain-timeout ($drain)"; }

# Kubernetes: the manifest as shipped, and a copy with a wrong type
check "kubernetes.yaml against the API's schemas" ok node "$src/tests/server/k8s_check.mjs" "$src/deploy/kubernetes.yaml"
sed 's/containerPort: 8080/containerPort: "eighty"/' "$src/deploy/kubernetes.yaml" > "$tmp/bad.yaml"
check "the schema check rejects a broken copy" bad node "$src/tests/server/k8s_check.mjs" "$tmp/bad.yaml"
grace=$(sed -n 's/.*terminationGracePeriodSeconds: \([0-9]*\).*/\1/p' "$src/deploy/kubernetes.yaml")
kdrain=$(grep -A1 -- "- --drain-timeout" "$src/deploy/kubernetes.yaml" | sed -n 's/.*"\([0-9]*\)".*/\1/p')
sleep=$(sed -n 's/.*command: \["sleep", "\([0-9]*\)"\].*/\1/p' "$src/deploy/kubernetes.yaml")
[ -n "$grace" ] && [ -n "$kdrain" ] && [ -n "$sleep" ] && [ "$grace" -gt $((kdrain + sleep)) ] ||
  { failed=$((failed + 1)); echo "FAIL: terminationGracePeriodSeconds ($grace) must exceed preStop ($sleep) + drain ($kdrain)"; }

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
