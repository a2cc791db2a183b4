#!/usr/bin/env bash
# The chart's TLS, NetworkPolicies and Sentinel auth: renders charts/dragonfly-csi with
# hack/chart/render in each case test/chart/tls_check.mjs knows and checks the objects
# (certificates from Secrets the chart generates, or cert-manager Certificates when the cluster
# serves cert-manager.io/v1; every TLS key of both daemons naming the mounted files; no TLS key
# with tls.enabled=false; per-node certificates from a hostPath; the NetworkPolicies; Sentinel
# requirepass). Then the generated certificates are used for real: openssl verifies them against
# the generated CA, and a TLS 1.3 handshake with client certificates between openssl s_server
# (the scheduler's certificate) and s_client (the nodes' certificate, checking the scheduler's
# DNS name) succeeds on 127.0.0.1, while a client without a certificate or with another CA's is
# refused. Every rendering also passes hack/chart/validate.mjs (schemas, --print-config, mounts).
#   test/chart/tls_test.sh [BUILD_DIR]
# Exit 77 (skip) when go, node, npm or openssl is missing.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(mkdir -p "${1:-$root/build}" && cd "${1:-$root/build}" && pwd)
chart=${CHART_DIR:-$root/charts/dragonfly-csi}
render=$build/chart-render
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$root/test/chart/lib.sh" tls_test

need_tools go node npm openssl timeout
need_built daemon/dfdaemon daemon/cmd/dfcache/dfcache csi/csi-plugin scheduler/scheduler
bash "$root/hack/chart/build-render.sh" "$build" || die "building the renderer failed"
npm_ci_chart
make_work TERM

# run_case CASE [render args...]: renders, validates and runs tls_check.mjs CASE.
run_case() {
    local name=$1 out
    shift
    if ! "$render" --chart "$chart" --name dfc --namespace dragonfly-system "$@" >"$work/$name.yaml" 2>"$work/$name.err"; then
        fail "$name: render failed: $(head -c 400 "$work/$name.err")"
        return
    fi
    if out=$(node "$root/hack/chart/validate.mjs" --build "$build" "$work/$name.yaml" 2>/dev/null); then
        ok "$name: $out"
    else
        fail "$name: validate.mjs: $out"
    fi
    out=$(node "$root/test/chart/tls_check.mjs" "$work/$name.yaml" "$name" "$work/$name.pem")
    echo "$out"
    passed=$((passed + $(grep -c '^ok' <<<"$out")))
    failed=$((failed + $(grep -c '^FAIL' <<<"$out")))
}

run_case generated
run_case netpol-default
run_case server-auth --set tls.policy=server-auth
run_case cert-manager --api-versions cert-manager.io/v1
run_case issuer-ref --set tls.certManager=true \
    --set tls.issuerRef.name=corp-ca,tls.issuerRef.kind=ClusterIssuer,tls.issuerRef.group=cert-manager.io
run_case tls-off --set tls.enabled=false
run_case host-path --set tls.nodeCertificates.source=hostPath,tls.nodeCertificates.hostPath=/etc/dfc-node-tls
run_case sentinel-auth --set redis.sentinel.enabled=true
run_case sentinel-no-auth --set redis.sentinel.enabled=true,redis.sentinel.auth.enabled=false
run_case netpol-cidrs --set 'networkPolicy.scheduler.nodeCIDRs={10.0.0.0/16,192.168.0.0/24}'
run_case netpol-off --set networkPolicy.enabled=false
# Redis TLS is on by default (redis.tls.enabled); redis-tls-off turns it off alone.
run_case redis-tls --set redis.sentinel.enabled=true
run_case redis-tls-cert-manager --set redis.sentinel.enabled=true --api-versions cert-manager.io/v1
run_case redis-tls-off --set redis.tls.enabled=false
# tls.certManager=false wins over the API's presence; a bad switch or policy is refused.
"$render" --chart "$chart" --name dfc --namespace dragonfly-system --api-versions cert-manager.io/v1 \
    --set tls.certManager=false >"$work/cm-false.yaml" 2>&1
if grep -q '^kind: Certificate' "$work/cm-false.yaml" || ! grep -q 'name: dfc-dragonfly-csi-scheduler-tls' "$work/cm-false.yaml"; then
    fail "tls.certManager=false with cert-manager.io/v1: want generated Secrets and no Certificate"
else
    ok "tls.certManager=false with cert-manager.io/v1: generated Secrets, no Certificate"
fi
# refused SETTINGS PATTERN: rendering with --set SETTINGS fails with a message matching PATTERN.
refused() {
    if "$render" --chart "$chart" --set "$1" >/dev/null 2>"$work/bad.err"; then
        fail "--set $1 rendered"
    elif grep -q "error calling fail: $2" "$work/bad.err"; then
        ok "--set $1 refused: $(grep -o 'error calling fail: .*' "$work/bad.err" | tail -1)"
    else
        fail "--set $1: unexpected error $(head -c 300 "$work/bad.err")"
    fi
}
refused tls.certManager=maybe "tls.certManager must be"
refused tls.policy=off "tls.policy must be"
refused tls.nodeCertificates.source=csi "tls.nodeCertificates.source must be"

# ---- helm upgrade: the Secrets read back with lookup (chart-render --lookup) are kept ----
# dump NAME ARGS...: renders and writes the Secrets' files to $work/NAME.pem/.
dump() {
    local name=$1
    shift
    "$render" --chart "$chart" --name dfc --namespace dragonfly-system "$@" >"$work/$name.yaml" &&
        node "$root/test/chart/tls_check.mjs" "$work/$name.yaml" dump "$work/$name.pem" >/dev/null
}
sec=dfc-dragonfly-csi
if ! dump again || ! dump upgrade --lookup "$work/generated.yaml"; then
    die "rendering for the upgrade checks failed"
fi
if ! cmp -s "$work/generated.pem/$sec-ca.tls.key" "$work/again.pem/$sec-ca.tls.key"; then
    ok "without lookup (an install) a new CA is made"
else
    fail "two installs made the same CA key"
fi
same=1
for f in "$work"/generated.pem/*; do
    cmp -s "$f" "$work/upgrade.pem/$(basename "$f")" || same=0
done
if [ "$same" = 1 ] && [ "$(find "$work/upgrade.pem" -type f | wc -l)" -eq 13 ]; then
    ok "upgrade: the CA, scheduler, node and Redis Secrets and the Redis password are kept (lookup)"
else
    fail "upgrade: a Secret changed although lookup found it"
fi
# Only the CA Secret left (the leaves deleted): new leaves, signed by the kept CA.
NODE_PATH=$root/hack/chart/node_modules node -e '
const { parseAllDocuments } = require("yaml");
const fs = require("fs");
const docs = parseAllDocuments(fs.readFileSync(process.argv[1], "utf8")).map((d) => d.toJS()).filter(Boolean);
const ca = docs.find((d) => d.kind === "Secret" && d.metadata.name === process.argv[2]);
fs.writeFileSync(process.argv[3], JSON.stringify(ca));' "$work/generated.yaml" "$sec-ca" "$work/ca-only.json"
dump leaves --lookup "$work/ca-only.json"
if cmp -s "$work/generated.pem/$sec-ca.tls.crt" "$work/leaves.pem/$sec-ca.tls.crt" &&
    ! cmp -s "$work/generated.pem/$sec-scheduler-tls.tls.key" "$work/leaves.pem/$sec-scheduler-tls.tls.key" &&
    openssl verify -CAfile "$work/generated.pem/$sec-ca.ca.crt" "$work/leaves.pem/$sec-scheduler-tls.tls.crt" \
        "$work/leaves.pem/$sec-node-tls.tls.crt" >/dev/null 2>&1; then
    ok "upgrade with only the CA Secret left: the CA is kept, new leaves are signed by it"
else
    fail "upgrade with only the CA Secret left: CA not kept or leaves not signed by it"
fi

# ---- the generated certificates, for real ----
pem=$work/generated.pem
ca=$pem/dfc-dragonfly-csi-ca.ca.crt
sched=$pem/dfc-dragonfly-csi-scheduler-tls
node=$pem/dfc-dragonfly-csi-node-tls
fqdn=dfc-dragonfly-csi-scheduler-headless.dragonfly-system.svc.cluster.local
if [ -s "$ca" ] && cmp -s "$ca" "$sched.ca.crt" && cmp -s "$ca" "$node.ca.crt" &&
    cmp -s "$ca" "$pem/dfc-dragonfly-csi-ca.tls.crt"; then
    ok "every Secret's ca.crt is the CA"
else
    fail "the Secrets' ca.crt differ from the CA"
fi
if out=$(openssl verify -CAfile "$ca" -purpose sslserver "$sched.tls.crt" 2>&1) &&
    out2=$(openssl verify -CAfile "$ca" -purpose sslclient "$node.tls.crt" 2>&1); then
    ok "openssl verify: the scheduler's (server) and the nodes' (client) certificates chain to the CA"
else
    fail "openssl verify: $out ${out2:-}"
fi
if openssl x509 -in "$sched.tls.crt" -noout -ext subjectAltName 2>/dev/null | grep -q "DNS:$fqdn\(,\|$\)"; then
    ok "the scheduler's certificate names $fqdn (scheduler.addrs)"
else
    fail "the scheduler's certificate lacks DNS:$fqdn"
fi
if openssl x509 -in "$node.tls.crt" -noout -ext subjectAltName 2>/dev/null | grep -q "DNS:dfc-node\(,\|$\)" &&
    ! openssl x509 -in "$node.tls.crt" -noout -ext subjectAltName 2>/dev/null | grep -q "IP"; then
    ok "the shared node certificate names DNS:dfc-node (upload.client.serverName, peer.tls.serverName) and no IP"
else
    fail "the shared node certificate lacks DNS:dfc-node or names an IP"
fi
for f in "$sched" "$node"; do
    if openssl pkey -in "$f.tls.key" -noout -text 2>/dev/null | grep -q 'prime256v1\|P-256' &&
        [ "$(openssl pkey -in "$f.tls.key" -pubout 2>/dev/null)" = "$(openssl x509 -in "$f.tls.crt" -noout -pubkey 2>/dev/null)" ]; then
        ok "$(basename "$f"): an ECDSA P-256 key matching its certificate"
    else
        fail "$(basename "$f"): key and certificate do not match (or not P-256)"
    fi
done

redis=$work/redis-tls.pem/dfc-dragonfly-csi-redis-tls
if openssl verify -CAfile "$work/redis-tls.pem/dfc-dragonfly-csi-ca.ca.crt" -purpose sslserver "$redis.tls.crt" >/dev/null 2>&1 &&
    openssl x509 -in "$redis.tls.crt" -noout -checkhost \
        "dfc-dragonfly-csi-redis-2.dfc-dragonfly-csi-redis-headless.dragonfly-system.svc.cluster.local" 2>/dev/null |
    grep -q 'does match'; then
    ok "the Redis certificate chains to the CA and names every Redis pod (wildcard under the headless Service)"
else
    fail "the Redis certificate does not chain to the CA or does not name the Redis pods"
fi

# A TLS 1.3 server with the scheduler's certificate that requires a client certificate of the CA.
port=21491
openssl s_server -accept "127.0.0.1:$port" -tls1_3 -cert "$sched.tls.crt" -key "$sched.tls.key" \
    -CAfile "$ca" -Verify 2 -verify_return_error -naccept 3 -rev >"$work/s_server.log" 2>&1 &
pids+=("$!")
for _ in $(seq 50); do
    grep -q ACCEPT "$work/s_server.log" && break
    sleep 0.1
done
# handshake NAME ARGS...: an s_client run; prints its output.
handshake() {
    echo hello | timeout 10 openssl s_client -connect "127.0.0.1:$port" -tls1_3 -CAfile "$ca" \
        -verify_return_error -verify_hostname "$fqdn" -servername "$fqdn" -ign_eof "$@" 2>&1
}
# The strangers first: the server (3 accepts) must still serve the nodes' certificate after them.
out=$(handshake)
if grep -q 'olleh' <<<"$out"; then
    fail "a client without a certificate was served"
else
    ok "a client without a certificate is refused"
fi
bash "$root/test/support/make-certs.sh" ca "$work/other-ca" &&
    bash "$root/test/support/make-certs.sh" leaf "$work/other-ca" "$work/other" "DNS:intruder" --cn intruder
out=$(handshake -cert "$work/other/tls.crt" -key "$work/other/tls.key")
if grep -q 'olleh' <<<"$out"; then
    fail "a client with another CA's certificate was served"
else
    ok "a client with another CA's certificate is refused"
fi
out=$(handshake -cert "$node.tls.crt" -key "$node.tls.key")
if grep -q 'Verify return code: 0 (ok)' <<<"$out" && grep -q 'olleh' <<<"$out" && grep -q 'TLSv1.3' <<<"$out"; then
    ok "mutual TLS 1.3: the nodes' certificate to the scheduler's, by its DNS name: handshake and data"
else
    fail "mutual TLS handshake failed: $(tail -5 <<<"$out")"
fi

echo "tls_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
