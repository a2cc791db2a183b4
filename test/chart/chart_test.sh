#!/usr/bin/env bash
# The chart test: renders charts/dragonfly-csi with hack/chart/render (no helm) with its default
# values and with each charts/dragonfly-csi/ci/*.yaml, and checks every rendered object with
# hack/chart/validate.mjs against the Kubernetes schemas and the binaries built in BUILD_DIR.
# First it proves the checks can fail: the fixture chart test/chart/fixtures/validate passes as
# it is, and each of its faults.* values must be reported with the expected line. The chart's
# examples/*.yaml (plain manifests) are validated too (--examples: no namespace needed).
#   test/chart/chart_test.sh [BUILD_DIR]        (default build; dfdaemon etc. must be built there)
#   CHART_DIR=/path/to/dragonfly-csi test/chart/chart_test.sh   check another copy of the chart
# Exit 77 (skip) when go or node is missing; CI installs both (hack/install-deps.sh).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(mkdir -p "${1:-$root/build}" && cd "${1:-$root/build}" && pwd)
chart=${CHART_DIR:-$root/charts/dragonfly-csi}
fixture=$root/test/chart/fixtures/validate
render=$build/chart-render
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$root/test/chart/lib.sh" chart_test

need_tools go node npm
need_built daemon/dfdaemon daemon/cmd/dfcache/dfcache csi/csi-plugin scheduler/scheduler
bash "$root/hack/chart/build-render.sh" "$build" || die "building the renderer failed"
npm_ci_chart

tmp=$(mktemp -d "${TMPDIR:-/tmp}/chart_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# check NAME CHART [render args...]: renders and validates; 0 when both pass. Output in
# $tmp/NAME.yaml, problems in $tmp/NAME.out, notes and errors in $tmp/NAME.err (NAME: a file name).
check() {
    local name=$1 dir=$2
    shift 2
    if ! "$render" --chart "$dir" --name dfc --namespace dragonfly-system "$@" \
        >"$tmp/$name.yaml" 2>"$tmp/$name.err"; then
        echo "render failed:" >"$tmp/$name.out"
        cat "$tmp/$name.err" >>"$tmp/$name.out"
        return 2
    fi
    node "$root/hack/chart/validate.mjs" --build "$build" "$tmp/$name.yaml" \
        >"$tmp/$name.out" 2>>"$tmp/$name.err"
}

# expect_clean LABEL CHART [render args...]
expect_clean() {
    local label=$1 name
    name=$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_')
    shift
    if check "$name" "$@"; then
        ok "$label: $(cat "$tmp/$name.out")"
        sed 's/^/     /' "$tmp/$name.err"
    else
        sed 's/^/     /' "$tmp/$name.out" "$tmp/$name.err" >&2
        fail "$label"
    fi
}

# expect_problem FAULT PATTERN: the fixture with faults.FAULT=true must fail validation with a
# line matching PATTERN.
expect_problem() {
    local fault=$1 pattern=$2 rc=0
    check "fault-$fault" "$fixture" --set "faults.$fault=true" || rc=$?
    if [ "$rc" -ne 1 ]; then
        sed 's/^/     /' "$tmp/fault-$fault.out" "$tmp/fault-$fault.err" >&2
        fail "fault $fault: validate exit $rc, want 1"
    elif ! grep -qE -- "$pattern" "$tmp/fault-$fault.out"; then
        sed 's/^/     /' "$tmp/fault-$fault.out" >&2
        fail "fault $fault: no line matches /$pattern/"
    else
        ok "fault $fault: $(grep -E -- "$pattern" "$tmp/fault-$fault.out" | head -1)"
    fi
}

expect_clean fixture "$fixture"
ds='DaemonSet/dfc-node \(validate/templates/daemonset.yaml\): spec.template.spec'
expect_problem emptyDirSocket "^$ds.volumes\[socket-dir\]: the dfdaemon socket dir volume is emptyDir, must be hostPath"
expect_problem renamedSocketVolume "^$ds.volumes\[run\]: the dfdaemon socket dir volume is emptyDir"
expect_problem unknownFlag "^$ds.containers\[dfdaemon\].args: dfdaemon has no flag --no-such-flag"
expect_problem unknownShellFlag "^Job/dfc-import .*containers\[import\].command \(shell script\): dfcache import has no flag --replicas"
expect_problem probePort "^$ds.containers\[dfdaemon\].livenessProbe.tcpSocket.port: port 4001 is not declared"
expect_problem undeclaredMount "^$ds.containers\[dfdaemon\].volumeMounts\[no-such-volume\].name: no volume named no-such-volume"
expect_problem driverMismatch "^CSIDriver/other.example.com .*metadata.name: other.example.com is not csi-plugin's --driver-name uds.csi.dragonflyoss.io"
expect_problem storageClassMismatch "^StorageClass/dragonfly-socket .*provisioner: wrong.example.com is not csi-plugin's --driver-name"
expect_problem schema "^CSIDriver/uds.csi.dragonflyoss.io .*schema: spec.attachRequired must be boolean"
expect_problem badDaemonConfig "^ConfigMap/dfc-dfdaemon .*data.dfdaemon.yaml: dfdaemon --config F --print-config rejects it: .*unknown key .noSuchKey."
expect_problem badSchedulerConfig "^ConfigMap/dfc-scheduler .*data.scheduler.yaml: scheduler --config F --print-config rejects it: .*unknown key .server2."
expect_problem noNamespace "^ConfigMap/dfc-dfdaemon .*metadata.namespace: missing on namespaced kind ConfigMap"
expect_problem clusterNamespace "^CSIDriver/.*metadata.namespace: set on cluster-scoped kind CSIDriver"
expect_problem pluginSocketDir "^$ds.containers\[csi-plugin\].args: csi-plugin --socket-dir /csi is host path .*, dfdaemon's socket dir is host path /var/run/dragonfly"
expect_problem missingConfigMap "^$ds.volumes\[config\].configMap.name: ConfigMap dfc-dfdaemon-gone is not rendered"
expect_problem tlsUnmounted "^$ds.containers\[dfdaemon\].volumeMounts: dfdaemon upload.server.caCert /etc/dfc-tls/ca.crt: no volumeMount contains"
expect_problem tlsMissingKey "^$ds.containers\[dfdaemon\].volumeMounts: dfdaemon (upload|scheduler)[a-z.]*.key /etc/dfc-tls/tls.key: Secret dfc-node-tls has no key tls.key"
expect_problem tlsMissingSecret "^Deployment/dfc-scheduler .*containers\[scheduler\].volumeMounts: scheduler server.tls.caCert /etc/tls/ca.crt: Secret dfc-scheduler-tls-gone is neither rendered nor the secretName of a rendered Certificate"

# Input the validator must refuse on its own: not YAML, not an object, no name.
printf -- '---\n# Source: x/templates/a.yaml\nkind: [\n---\n# Source: x/templates/b.yaml\n- 1\n---\n# Source: x/templates/c.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: ns\n' >"$tmp/broken.yaml"
rc=0
node "$root/hack/chart/validate.mjs" --build "$build" "$tmp/broken.yaml" >"$tmp/broken.out" 2>&1 || rc=$?
if [ "$rc" -eq 1 ] && grep -q '^x/templates/a.yaml (document 1 of .*): YAML:' "$tmp/broken.out" &&
    grep -q '^x/templates/b.yaml .*: not a mapping' "$tmp/broken.out" &&
    grep -q '^ConfigMap/? (x/templates/c.yaml): metadata.name: missing' "$tmp/broken.out"; then
    ok "broken input: YAML error, non-object and nameless object reported"
else
    sed 's/^/     /' "$tmp/broken.out" >&2
    fail "broken input (exit $rc)"
fi

# Custom resources: a ServiceMonitor is checked against the prometheus-operator schema, a kind
# no package has is noted (not an error).
printf -- '---\n# Source: x/templates/sm.yaml\napiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: sm\n  namespace: ns\nspec:\n  selector: {}\n  endpoints:\n    - port: metrics\n      interval: 30\n---\n# Source: x/templates/w.yaml\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: ns\n' >"$tmp/crd.yaml"
rc=0
node "$root/hack/chart/validate.mjs" --build "$build" "$tmp/crd.yaml" >"$tmp/crd.out" 2>"$tmp/crd.err" || rc=$?
if [ "$rc" -eq 1 ] && grep -q '^ServiceMonitor/sm (x/templates/sm.yaml): schema: spec.endpoints.0.interval must be string$' "$tmp/crd.out" &&
    [ "$(wc -l <"$tmp/crd.out")" -eq 1 ] &&
    grep -q 'note: Widget/w .*no schema for example.com/v1 Widget' "$tmp/crd.err"; then
    ok "custom resources: ServiceMonitor schema checked, unknown kind noted"
else
    sed 's/^/     /' "$tmp/crd.out" "$tmp/crd.err" >&2
    fail "custom resources (exit $rc)"
fi

if [ -f "$chart/Chart.yaml" ]; then
    expect_clean "dragonfly-csi defaults" "$chart"
    for v in "$chart"/ci/*.yaml; do
        [ -f "$v" ] || continue
        expect_clean "dragonfly-csi ci/$(basename "$v")" "$chart" -f "$v"
    done
    if compgen -G "$chart/examples/*.yaml" >/dev/null; then
        if node "$root/hack/chart/validate.mjs" --build "$build" --examples "$chart"/examples/*.yaml \
            >"$tmp/examples.out" 2>&1; then
            ok "dragonfly-csi examples/*.yaml: $(tail -1 "$tmp/examples.out")"
        else
            sed 's/^/     /' "$tmp/examples.out" >&2
            fail "dragonfly-csi examples/*.yaml"
        fi
    fi
else
    echo "chart_test: note: $chart is not in this tree yet: only the fixture chart was checked"
fi

echo "chart_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
