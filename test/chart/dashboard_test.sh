#!/usr/bin/env bash
# The chart's Grafana dashboard (charts/dragonfly-csi/dashboards/dragonfly-csi.json) against the
# real binaries: runs a dfdaemon (after a real import and export, so labelled series have
# counts), a scheduler on a real redis-server and a csi-plugin, each with its /metrics on a free
# loopback port, scrapes them, and checks with test/chart/dashboard_check.mjs that the JSON
# parses and every metric name of every panel and variable is one they export (histograms by
# their _bucket/_sum/_count series). Then proves the check can fail: a copy whose panel names a
# metric that does not exist, and one using a histogram's bare name, must be reported. Then the
# chart rendered with ci/monitoring-values.yaml holds the file byte for byte in its ConfigMap,
# and its ServiceMonitor reaches exactly dfdaemon's, the scheduler's and csi-plugin's metrics
# container ports (test/chart/scrape_targets.mjs); without the CRD in .Capabilities and without
# monitoring.serviceMonitor.force, rendering fails with a message; by default nothing of it.
#   test/chart/dashboard_test.sh [BUILD_DIR]
# Exit 77 (skip) when go, node, npm or redis-server is missing; CI installs them
# (hack/install-deps.sh). No root needed: csi-plugin starts without it.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(mkdir -p "${1:-$root/build}" && cd "${1:-$root/build}" && pwd)
chart=${CHART_DIR:-$root/charts/dragonfly-csi}
dashboard=$chart/dashboards/dragonfly-csi.json
check=$root/test/chart/dashboard_check.mjs
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$root/test/chart/lib.sh" dashboard_test

need_tools go node npm redis-server
need_built daemon/dfdaemon daemon/cmd/dfcache/dfcache csi/csi-plugin scheduler/scheduler

make_work TERM

# Four distinct free loopback ports (the kernel's choice, all held until the last is picked,
# then closed before the daemons bind them).
read -r dport sport cport rport < <(node -e '
const net = require("net");
const ports = [];
(function next() {
  const s = net.createServer().listen(0, "127.0.0.1", () => {
    ports.push(s.address().port);
    if (ports.length < 4) next();
    else {
      console.log(ports.join(" "));
      process.exit(0);
    }
  });
})();') || die "no free ports"

# scrape PORT: GET http://127.0.0.1:PORT/metrics to stdout; fails unless 200.
scrape() {
    node --no-warnings -e 'fetch(process.argv[1]).then(async (r) => {
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      process.stdout.write(await r.text());
    }).catch((e) => { console.error(e.message); process.exit(1); });' "http://127.0.0.1:$1/metrics"
}

# wait_metrics PORT PID LOG NAME: until PORT accepts connections, then GET /metrics answers.
wait_metrics() {
    local i
    for i in $(seq 1 500); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
            scrape "$1" >/dev/null && return 0
        fi
        kill -0 "$2" 2>/dev/null || { cat "$3" >&2; die "$4 exited"; }
        sleep 0.02
    done
    cat "$3" >&2
    die "$4 serves no /metrics on 127.0.0.1:$1"
}

# ---- dfdaemon, with an import and an export ----
mkdir -p "$work/run" "$work/store" "$work/kubelet" "$work/csi-state" "$work/redis"
cat >"$work/dfdaemon.yaml" <<YAML
download:
  server:
    socketPath: $work/run/dfdaemon.sock
storage:
  dir: $work/store
metrics:
  server:
    ip: 127.0.0.1
    port: $dport
health:
  server:
    port: 0
YAML
"$build/daemon/dfdaemon" --config "$work/dfdaemon.yaml" >"$work/dfdaemon.log" 2>&1 &
pids+=($!)
wait_metrics "$dport" "${pids[-1]}" "$work/dfdaemon.log" dfdaemon
head -c 100000 /dev/urandom >"$work/file"
dfcache=("$build/daemon/cmd/dfcache/dfcache")
out=$("${dfcache[@]}" import -e "$work/run/dfdaemon.sock" --no-progress "$work/file" 2>&1) ||
    die "dfcache import failed: $out"
id=${out##*Done: }
"${dfcache[@]}" export -e "$work/run/dfdaemon.sock" --no-progress -O "$work/out" "$id" >/dev/null ||
    die "dfcache export $id failed"
cmp -s "$work/file" "$work/out" || die "the exported file differs from the imported one"

# ---- the scheduler on a real Redis ----
redis-server --bind 127.0.0.1 --port "$rport" --save '' --appendonly no --dir "$work/redis" \
    >"$work/redis.log" 2>&1 &
pids+=($!)
cat >"$work/scheduler.yaml" <<YAML
server:
  listenIP: 127.0.0.1
  port: 0
  advertiseIP: 127.0.0.1
database:
  redis:
    addrs: [127.0.0.1:$rport]
metrics:
  server:
    ip: 127.0.0.1
    port: $sport
YAML
"$build/scheduler/scheduler" --config "$work/scheduler.yaml" >"$work/scheduler.log" 2>&1 &
pids+=($!)
wait_metrics "$sport" "${pids[-1]}" "$work/scheduler.log" scheduler

# ---- csi-plugin ----
"$build/csi/csi-plugin" --endpoint "unix://$work/csi.sock" --socket-dir "$work/run" \
    --kubelet-dir "$work/kubelet" --state-dir "$work/csi-state" \
    --metrics-address "127.0.0.1:$cport" >"$work/csi.log" 2>&1 &
pids+=($!)
wait_metrics "$cport" "${pids[-1]}" "$work/csi.log" csi-plugin

for c in dfdaemon:$dport scheduler:$sport csi:$cport; do
    scrape "${c#*:}" >"$work/${c%%:*}.metrics" || die "scrape of ${c%%:*} failed"
done
grep -q '^dragonfly_dfdaemon_upload_task_total{source="path"} 1$' "$work/dfdaemon.metrics" ||
    die "dfdaemon's /metrics does not count the import"
scrapes=("$work/dfdaemon.metrics" "$work/scheduler.metrics" "$work/csi.metrics")

# ---- the dashboard against the scrapes ----
if node "$check" "$dashboard" "${scrapes[@]}" >"$work/check.out" 2>&1; then
    ok "$(cat "$work/check.out")"
else
    sed 's/^/     /' "$work/check.out" >&2
    fail "the dashboard names metrics the binaries do not export"
fi

# expect_reported LABEL FROM TO PATTERN: a copy with every FROM replaced by TO must fail
# with a line matching PATTERN.
expect_reported() {
    local label=$1 from=$2 to=$3 pattern=$4 rc=0
    sed "s/$from/$to/g" "$dashboard" >"$work/bad.json"
    cmp -s "$dashboard" "$work/bad.json" && die "$label: $from is not in the dashboard"
    node "$check" "$work/bad.json" "${scrapes[@]}" >"$work/bad.out" 2>&1 || rc=$?
    if [ "$rc" -eq 1 ] && grep -qE -- "$pattern" "$work/bad.out"; then
        ok "$label: $(grep -E -- "$pattern" "$work/bad.out" | head -1)"
    else
        sed 's/^/     /' "$work/bad.out" >&2
        fail "$label: exit $rc, want 1 and a line matching /$pattern/"
    fi
}
expect_reported "unknown metric" 'dragonfly_scheduler_hosts{' 'dragonfly_scheduler_hostz{' \
    '^panel [0-9]+ "Hosts" target A: dragonfly_scheduler_hostz is not in the /metrics of any binary$'
expect_reported "histogram's bare name" 'dragonfly_csi_grpc_server_handling_seconds_bucket' \
    'dragonfly_csi_grpc_server_handling_seconds' \
    'target [AB]: dragonfly_csi_grpc_server_handling_seconds is a histogram: use'
expect_reported "unknown metric in a variable" 'label_values(dragonfly_dfdaemon_grpc_server_handled_total,' \
    'label_values(dragonfly_dfdaemon_rpcs_total,' \
    '^variable namespace: dragonfly_dfdaemon_rpcs_total is not in the /metrics'
printf '{"panels": [' >"$work/broken.json"
rc=0
node "$check" "$work/broken.json" "${scrapes[@]}" >"$work/broken.out" 2>&1 || rc=$?
if [ "$rc" -eq 1 ] && grep -q ': not JSON: ' "$work/broken.out"; then
    ok "broken JSON: $(cat "$work/broken.out")"
else
    sed 's/^/     /' "$work/broken.out" >&2
    fail "broken JSON: exit $rc, want 1 and 'not JSON'"
fi

# ---- the rendered ConfigMap holds the file ----
bash "$root/hack/chart/build-render.sh" "$build" || die "building the renderer failed"
npm_ci_chart
"$build/chart-render" --chart "$chart" --name dfc --namespace dragonfly-system \
    -f "$chart/ci/monitoring-values.yaml" >"$work/rendered.yaml" 2>"$work/render.err" || {
    cat "$work/render.err" >&2
    die "rendering with ci/monitoring-values.yaml failed"
}
NODE_PATH=$root/hack/chart/node_modules node --input-type=module -e '
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
const require = createRequire(process.env.NODE_PATH + "/");
const { parseAllDocuments } = require("yaml");
const [rendered, file] = process.argv.slice(1);
const cms = parseAllDocuments(readFileSync(rendered, "utf8")).map((d) => d.toJS())
  .filter((o) => o && o.kind === "ConfigMap" && o.metadata.name.endsWith("-grafana-dashboard"));
if (cms.length !== 1) { console.log(`${cms.length} dashboard ConfigMaps rendered, want 1`); process.exit(1); }
const cm = cms[0];
const want = readFileSync(file, "utf8");
const got = cm.data && cm.data["dragonfly-csi.json"];
if (got !== want) { console.log(`data["dragonfly-csi.json"] differs from the file (${got && got.length} vs ${want.length} bytes)`); process.exit(1); }
if (cm.metadata.labels.grafana_dashboard !== "1") { console.log("no grafana_dashboard: \"1\" label"); process.exit(1); }
if (cm.metadata.namespace !== "monitoring") { console.log(`namespace ${cm.metadata.namespace}, want monitoring`); process.exit(1); }
console.log(`ConfigMap ${cm.metadata.namespace}/${cm.metadata.name}: the file byte for byte (${want.length} bytes), label grafana_dashboard=1`);
' "$work/rendered.yaml" "$dashboard" >"$work/cm.out" 2>&1
if [ $? -eq 0 ]; then
    ok "$(cat "$work/cm.out")"
else
    sed 's/^/     /' "$work/cm.out" >&2
    fail "the rendered dashboard ConfigMap"
fi

# ---- the ServiceMonitor: what it scrapes, and when it renders ----
render() {
    "$build/chart-render" --chart "$chart" --name dfc --namespace dragonfly-system "$@"
}
node "$root/test/chart/scrape_targets.mjs" "$work/rendered.yaml" >"$work/targets.out" 2>&1
cat >"$work/targets.want" <<'EOF'
ServiceMonitor/dfc-dragonfly-csi metrics -> Service/dfc-dragonfly-csi-node-metrics -> DaemonSet/dfc-dragonfly-csi-node container dfdaemon port 4002
ServiceMonitor/dfc-dragonfly-csi metrics -> Service/dfc-dragonfly-csi-scheduler -> Deployment/dfc-dragonfly-csi-scheduler container scheduler port 8000
ServiceMonitor/dfc-dragonfly-csi csi-metrics -> Service/dfc-dragonfly-csi-node-metrics -> DaemonSet/dfc-dragonfly-csi-node container csi-plugin port 9810
EOF
if cmp -s "$work/targets.out" "$work/targets.want"; then
    ok "ServiceMonitor targets: dfdaemon :4002, scheduler :8000, csi-plugin :9810"
else
    diff "$work/targets.want" "$work/targets.out" | sed 's/^/     /' >&2
    fail "ServiceMonitor targets (< want, > got)"
fi
if grep -q -- '- --metrics-address=0.0.0.0:9810$' "$work/rendered.yaml"; then
    ok "csiPlugin.metricsPort 9810: csi-plugin --metrics-address=0.0.0.0:9810"
else
    fail "csiPlugin.metricsPort 9810: no --metrics-address=0.0.0.0:9810 in the DaemonSet"
fi
rc=0
render --set monitoring.serviceMonitor.enabled=true >/dev/null 2>"$work/nocrd.err" || rc=$?
if [ "$rc" -ne 0 ] && grep -q 'the cluster has no monitoring.coreos.com/v1 ServiceMonitor' "$work/nocrd.err"; then
    ok "ServiceMonitor without the CRD or force: rendering fails with the message"
else
    sed 's/^/     /' "$work/nocrd.err" >&2
    fail "ServiceMonitor without the CRD or force: exit $rc, want an error naming the missing CRD"
fi
if render --set monitoring.serviceMonitor.enabled=true \
    --api-versions monitoring.coreos.com/v1/ServiceMonitor >"$work/crd.yaml" 2>"$work/crd.err" &&
    [ "$(grep -c '^kind: ServiceMonitor$' "$work/crd.yaml")" -eq 1 ] &&
    node "$root/hack/chart/validate.mjs" --build "$build" "$work/crd.yaml" >"$work/crd.out" 2>&1; then
    ok "ServiceMonitor with the CRD in .Capabilities: rendered, $(cat "$work/crd.out")"
else
    sed 's/^/     /' "$work/crd.err" "$work/crd.out" >&2
    fail "ServiceMonitor with the CRD in .Capabilities"
fi
if render >"$work/defaults.yaml" 2>"$work/defaults.err" &&
    ! grep -q '^kind: ServiceMonitor$' "$work/defaults.yaml" &&
    ! grep -q -- '-grafana-dashboard$' "$work/defaults.yaml" &&
    ! grep -q -- '--metrics-address' "$work/defaults.yaml"; then
    ok "defaults: no ServiceMonitor, no dashboard ConfigMap, csi-plugin without --metrics-address"
else
    sed 's/^/     /' "$work/defaults.err" >&2
    fail "defaults render monitoring objects"
fi

if [ "$failed" -ne 0 ]; then
    echo "dashboard_test: $failed failure(s)" >&2
    exit 1
fi
echo "dashboard_test: passed"
