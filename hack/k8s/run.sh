#!/usr/bin/env bash
# The end-to-end test on a real kubelet (docs/k8s-e2e.md): the project image imported into the
# cluster's containerd (no registry), charts/dragonfly-csi rendered by the project's renderer
# with hack/k8s/values.yaml and applied with the cluster's kubectl, then the README's pod
# example:
#   1. pod `importer` mounts a PVC (a static PV of the driver) and an inline volume; inside it
#      `dfcache import --transfer stream` streams a 5 MB file (the daemon cannot see the pod's
#      filesystem) over the PVC's socket, and `dfcache stat` finds the task over the inline
#      volume's;
#   2. pod `exporter` runs `dfcache export --transfer-from-dfdaemon` over an inline volume; the
#      bytes' SHA-256 matches the importer's;
#   2b. pod `reader` reads the task through an inline content volume (docs/content-volumes.md):
#      the bytes' SHA-256 matches the importer's, and a write into the volume is refused;
#   3. the dfdaemon container is restarted while `importer` runs; its next `dfcache stat` works
#      through the same mounts (the directory bind survives the socket's re-creation);
#   4. everything is deleted; csi-plugin logged NodeUnpublishVolume for each of the 4 volumes,
#      no kubernetes.io~csi mount is left and the pods' directories are gone.
# Starts the cluster (hack/k8s/cluster.sh up) when it is not up, and leaves it as it found it
# (`cluster.sh down` stops it).
#
# Environment:
#   DFC_E2E_IMAGE_ARCHIVE  the image archive (default build/image/dragonfly-csi.tar, made by
#                          `hack/image/build.sh --save` when absent)
#   DFC_E2E_CHART_RENDER   the renderer (default build/chart-render, made by
#                          hack/chart/build-render.sh when absent)
#   DFC_E2E_KEEP=1         leave the test's objects in the cluster on failure (to inspect)
set -euo pipefail
# shellcheck source=hack/k8s/lib.sh
. "$(dirname "$0")/lib.sh"

here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/cluster.sh
archive=${DFC_E2E_IMAGE_ARCHIVE:-$e2e_root/build/image/dragonfly-csi.tar}
render=${DFC_E2E_CHART_RENDER:-$e2e_root/build/chart-render}
chart=$e2e_root/charts/dragonfly-csi
ns=dfc-e2e
release=dfc
driver=uds.csi.dragonflyoss.io
work=$cache/run/e2e
t_start=$SECONDS

k() { bash "$cluster" kubectl "$@"; }
kx() { bash "$cluster" exec "$@"; }
step() { log "[$((SECONDS - t_start)) s] $*"; }

# Waits up to $1 seconds for "${@:2}" to succeed (output dropped).
wait_ok() {
    local secs=$1 i
    shift
    for ((i = 0; i < secs; i++)); do
        if "$@" >/dev/null 2>&1; then
            return 0
        fi
        sleep 1
    done
    return 1
}

[ -d "$chart" ] || die "no chart at $chart (charts/dragonfly-csi, issue 11)"
if [ "$(bash "$cluster" status | head -n1)" = "cluster: down" ]; then
    step "starting the cluster"
    bash "$cluster" up
fi
rm -rf "$work"
mkdir -p "$work"

# --- the image and the chart --------------------------------------------------------------

if [ ! -e "$archive" ]; then
    [ -e "$e2e_root/hack/image/build.sh" ] || die "no image archive $archive and no hack/image/build.sh"
    step "building the image (hack/image/build.sh --save)"
    bash "$e2e_root/hack/image/build.sh" --save >&2
fi
image=$(tar -xOf "$archive" manifest.json 2>/dev/null | jq -r '.[0].RepoTags[0] // empty' || true)
[ -n "$image" ] || image=$(tar -xOf "$archive" index.json | jq -r '.manifests[0].annotations["io.containerd.image.name"]')
[ -n "$image" ] || die "cannot tell the image's name from $archive"
image=${image#docker.io/}
case $image in */*) ;; *) image=localhost/$image ;; esac
step "importing $image from $archive"
# ctr on this side (the archive may be in a /tmp the namespace does not see); containerd unpacks
"$cache/root/usr/bin/ctr" --address "$cache/run/containerd/containerd.sock" -n k8s.io images import \
    "$archive" >/dev/null
# Listed first, then searched: under pipefail, `ctr ... | grep -q` fails when grep exits at
# the match before ctr has written its next line (SIGPIPE), as it did once here.
images=$(kx ctr --address "$cache/run/containerd/containerd.sock" -n k8s.io images ls -q)
grep -qx "$image" <<<"$images" || die "containerd has no $image after the import"

if [ ! -x "$render" ]; then
    step "building the chart renderer"
    bash "$e2e_root/hack/chart/build-render.sh" "$(dirname "$render")" >&2
fi
step "rendering the chart"
"$render" --chart "$chart" --values "$here/values.yaml" --set-string "image.tag=${image##*:}" \
    --name "$release" --namespace "$ns" --kube-version 1.20 >"$work/chart.yaml"
# to JSON (for jq), by the cluster's kubectl, without sending anything
k create --dry-run=client -o json -f - <"$work/chart.yaml" |
    jq -s '{apiVersion: "v1", kind: "List", items: ([.[] | if .kind == "List" then .items[] else . end])}' \
        >"$work/chart.json"
if jq -e '.items[] | select(.kind == "DaemonSet") | .spec.template.spec.containers[] |
    select(.name == "node-driver-registrar")' "$work/chart.json" >/dev/null; then
    # The chart has no switch for its sidecars yet: take them out here and give csi-plugin the
    # registration flag the e2e values ask for (values.yaml: registrar.enabled,
    # livenessProbe.enabled, csiPlugin.kubeletRegistration).
    step "the chart still has its sidecars: removing them from the rendered DaemonSet"
    jq --arg kd /var/lib/kubelet --arg drv "$driver" '
        .items |= map(if .kind == "DaemonSet" then
          .spec.template.spec.containers |= (map(select(.name != "node-driver-registrar" and
              .name != "liveness-probe" and .name != "csi-provisioner")) |
            map(if .name == "csi-plugin" then
              .args += ["--kubelet-registration-dir=/registration",
                        "--kubelet-registration-path=\($kd)/plugins/\($drv)/csi.sock"] |
              .volumeMounts += [{name: "registration-dir", mountPath: "/registration"}] |
              del(.livenessProbe) | del(.ports)
            else . end))
        else . end)' "$work/chart.json" >"$work/chart.json.new"
    mv "$work/chart.json.new" "$work/chart.json"
fi
# The binaries the DaemonSet runs must be where the image has them.
image_files=$(tar -xOf "$archive" manifest.json | jq -r '.[0].Layers[]' |
    while read -r layer; do tar -xOf "$archive" "$layer" | tar -t; done | sed 's|^\./||')
for bin in $(jq -r '.items[] | select(.kind == "DaemonSet") | .spec.template.spec.containers[] |
    select(.image | startswith("localhost/dragonfly-csi")) | .args[0]' "$work/chart.json" | sort -u); do
    if ! grep -qx "${bin#/}" <<<"$image_files"; then
        in_image=$(grep -m1 "/$(basename "$bin")\$" <<<"$image_files" | sed 's|^|/|' || true)
        if [ -n "${DFC_E2E_FIX_BIN_PATH:-}" ] && [ -n "$in_image" ]; then
            log "WORKAROUND (DFC_E2E_FIX_BIN_PATH): the chart runs $bin, the image has $in_image"
            jq --arg from "$bin" --arg to "$in_image" '.items |= map(if .kind == "DaemonSet" then
                .spec.template.spec.containers |= map(if .args[0] == $from then .args[0] = $to
                else . end) else . end)' "$work/chart.json" >"$work/chart.json.new"
            mv "$work/chart.json.new" "$work/chart.json"
        else
            die "the chart runs $bin but the image has ${in_image:-no such file} (chart and image disagree)"
        fi
    fi
done
jq -e '[.items[] | select(.kind == "DaemonSet") | .spec.template.spec.containers[] |
    select(.name == "csi-plugin") | .args[] | select(startswith("--kubelet-registration-dir"))] |
    length == 1' "$work/chart.json" >/dev/null || die "csi-plugin does not register itself in the rendered chart"

# --- the driver ---------------------------------------------------------------------------

cleanup() {
    local rc=$?
    if [ $rc -ne 0 ] && [ -n "${DFC_E2E_KEEP:-}" ]; then
        log "failed; objects kept (DFC_E2E_KEEP), work files in $work"
        return
    fi
    if [ $rc -ne 0 ]; then
        log "failed; csi-plugin's log tail:"
        k -n "$ns" logs "ds/$release-dragonfly-csi-node" -c csi-plugin --tail 20 >&2 || true
        k delete pod importer exporter reader --ignore-not-found --wait=true --timeout 60s >/dev/null 2>&1 || true
        k delete pvc dfdaemon-socket --ignore-not-found --timeout 30s >/dev/null 2>&1 || true
        k delete pv dfc-e2e-socket --ignore-not-found --timeout 30s >/dev/null 2>&1 || true
        k delete -f "$work/chart.json" --ignore-not-found --timeout 60s >/dev/null 2>&1 || true
        k delete ns "$ns" --ignore-not-found --timeout 60s >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT

step "applying the chart (namespace $ns)"
k create namespace "$ns" >/dev/null
k apply -f "$work/chart.json" >/dev/null
k -n "$ns" rollout status "ds/$release-dragonfly-csi-node" --timeout 180s >/dev/null ||
    die "the node DaemonSet did not become ready"
node_pod=$(k -n "$ns" get pods -l app.kubernetes.io/component=dfdaemon -o jsonpath='{.items[0].metadata.name}')
step "node pod $node_pod ready; waiting for kubelet to register $driver"
wait_ok 60 bash -c "bash '$cluster' kubectl get csinode $node_name -o jsonpath='{.spec.drivers[*].name}' | grep -qw $driver" ||
    die "kubelet did not register $driver (CSINode $node_name)"
grep -q 'csi.registered' <<<"$(k -n "$ns" logs "$node_pod" -c csi-plugin)" ||
    die "csi-plugin did not log kubelet's registration"

# --- 1. import in a pod with a PVC and an inline volume -----------------------------------

step "pod importer (PVC + inline volume)"
sed "s|IMAGE|$image|" "$here/manifests/pods.yaml" | k apply -f - >/dev/null
k wait --for=condition=Ready pod/importer --timeout 120s >/dev/null || die "pod importer did not start"
wait_ok 30 k exec importer -- test -e /tmp/ready || die "importer made no data"
k exec importer -- test -S /run/df-pvc/dfdaemon.sock || die "no socket in the PVC's mount"
k exec importer -- test -S /run/df-inline/dfdaemon.sock || die "no socket in the inline mount"
# --transfer stream: the chart's hostPID lets the descriptor pass work too (auto would use it)
k exec importer -- dfcache import -e /run/df-pvc/dfdaemon.sock --transfer stream --log-level debug /tmp/data \
    >"$work/import.out" 2>"$work/import.err" || {
    cat "$work/import.err" >&2
    die "dfcache import failed in the pod"
}
id=$(sed -n 's/^Done: //p' "$work/import.out")
[ -n "$id" ] || die "dfcache import printed no task id: $(cat "$work/import.out")"
grep -q 'streaming' "$work/import.err" || die "the import did not stream: $(cat "$work/import.err")"
want=$(k exec importer -- sha256sum /tmp/data | cut -d' ' -f1)
k exec importer -- dfcache stat -e /run/df-inline/dfdaemon.sock --no-progress "$id" >"$work/stat1.out" ||
    die "dfcache stat over the inline volume failed"
step "imported task $id (streamed), sha256 $want"

# --- 2. export in a second pod ------------------------------------------------------------

step "pod exporter (inline volume, --transfer-from-dfdaemon)"
sed "s|IMAGE|$image|; s|TASK_ID|$id|" "$here/manifests/exporter.yaml" | k apply -f - >/dev/null
wait_ok 120 bash -c "bash '$cluster' kubectl get pod exporter -o jsonpath='{.status.phase}' | grep -qx -e Succeeded -e Failed" ||
    die "pod exporter did not finish"
k logs exporter >"$work/exporter.log"
[ "$(k get pod exporter -o jsonpath='{.status.phase}')" = Succeeded ] ||
    die "pod exporter failed: $(cat "$work/exporter.log")"
got=$(awk 'length($1) == 64 && $2 == "/tmp/out" { print $1 }' "$work/exporter.log") # sha256sum's line
[ "$got" = "$want" ] || die "exported bytes differ: sha256 $got, imported $want"
step "exported bytes match (sha256 $got)"

step "pod reader (inline content volume of the task)"
sed "s|IMAGE|$image|; s|TASK_ID|$id|" "$here/manifests/reader.yaml" | k apply -f - >/dev/null
wait_ok 120 bash -c "bash '$cluster' kubectl get pod reader -o jsonpath='{.status.phase}' | grep -qx -e Succeeded -e Failed" ||
    die "pod reader did not finish"
k logs reader >"$work/reader.log"
[ "$(k get pod reader -o jsonpath='{.status.phase}')" = Succeeded ] ||
    die "pod reader failed: $(cat "$work/reader.log")"
got=$(awk 'length($1) == 64 && $2 == "/content/data" { print $1 }' "$work/reader.log")
[ "$got" = "$want" ] || die "the content volume's bytes differ: sha256 $got, imported $want"
grep -qx write-refused "$work/reader.log" || die "a write into the content volume was not refused: $(cat "$work/reader.log")"
step "the content volume's bytes match (sha256 $got) and it is read-only"

# --- 3. restart dfdaemon while the importer runs ------------------------------------------

restarts() {
    k -n "$ns" get pod "$node_pod" -o jsonpath='{.status.containerStatuses[?(@.name=="dfdaemon")].restartCount}'
}
before=$(restarts)
cid=$(k -n "$ns" get pod "$node_pod" -o jsonpath='{.status.containerStatuses[?(@.name=="dfdaemon")].containerID}')
cid=${cid#containerd://}
step "restarting the dfdaemon container (SIGTERM to ${cid:0:12})"
kx ctr --address "$cache/run/containerd/containerd.sock" -n k8s.io task kill -s SIGTERM "$cid"
wait_ok 120 bash -c "[ \"\$(bash '$cluster' kubectl -n $ns get pod $node_pod -o jsonpath='{.status.containerStatuses[?(@.name==\"dfdaemon\")].restartCount}')\" -gt $before ]" ||
    die "kubelet did not restart dfdaemon"
wait_ok 120 k -n "$ns" wait --for=condition=Ready "pod/$node_pod" --timeout 2s ||
    die "the node pod is not ready again after the restart"
k exec importer -- dfcache stat -e /run/df-pvc/dfdaemon.sock --no-progress "$id" >"$work/stat2.out" ||
    die "dfcache stat over the PVC failed after dfdaemon's restart"
k exec importer -- dfcache stat -e /run/df-inline/dfdaemon.sock --no-progress "$id" >"$work/stat3.out" ||
    die "dfcache stat over the inline volume failed after dfdaemon's restart"
step "after the restart (restartCount $(restarts)) dfcache stat works through both mounts"

# --- 4. delete everything; check what is left ---------------------------------------------

uids=$(k get pod importer exporter reader -o jsonpath='{.items[*].metadata.uid}')
step "deleting the pods, the PVC and the PV"
k delete pod importer exporter reader --wait=true --timeout 120s >/dev/null
k delete pvc dfdaemon-socket --wait=true --timeout 60s >/dev/null
k delete pv dfc-e2e-socket --wait=true --timeout 60s >/dev/null
k -n "$ns" logs "$node_pod" -c csi-plugin >"$work/csi-plugin.log"
n_unpub=$(grep -c 'NodeUnpublishVolume.*code=OK' "$work/csi-plugin.log" || true)
[ "$n_unpub" -ge 4 ] ||
    die "csi-plugin logged $n_unpub successful NodeUnpublishVolume calls, want 4 (log: $work/csi-plugin.log)"
grep -q 'NodeUnpublishVolume.*pin_id=cv-.*code=OK' "$work/csi-plugin.log" ||
    die "csi-plugin logged no NodeUnpublishVolume releasing a content pin (log: $work/csi-plugin.log)"
step "csi-plugin logged $n_unpub NodeUnpublishVolume calls"
no_csi_mounts() { ! kx grep -q 'kubernetes.io~csi' /proc/self/mountinfo; }
wait_ok 60 no_csi_mounts || die "a kubernetes.io~csi mount is left: $(kx grep 'kubernetes.io~csi' /proc/self/mountinfo)"
no_pod_dirs() {
    local u
    for u in $uids; do
        kx test ! -e "/var/lib/kubelet/pods/$u" || return 1
    done
}
wait_ok 90 no_pod_dirs || die "a pod directory is left under /var/lib/kubelet/pods ($uids)"
step "no kubernetes.io~csi mount and no pod directory left"
k delete -f "$work/chart.json" --wait=true --timeout 120s >/dev/null
k delete namespace "$ns" --wait=true --timeout 120s >/dev/null
trap - EXIT
step "passed"
