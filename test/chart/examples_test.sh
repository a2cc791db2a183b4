#!/usr/bin/env bash
# Runs the container scripts of charts/dragonfly-csi/examples/*.yaml as their pods would: as
# uid 1000 (the examples' runAsUser) with the example's env, dfcache on PATH, and the volume of
# the driver as csi-plugin publishes it: a read-only bind mount of a real dfdaemon's socket
# directory at the example's mountPath (/run/dragonfly), in a private mount namespace.
# Checks: pod-with-pvc imports (Done: ID), pod-inline-volume lists that task, job-import-model
# imports its model, and pod-export-model (given the job's task id, as its header says) writes
# the same bytes into its own directory with --transfer-from-dfdaemon.
#
# What differs from a cluster: the pods' emptyDirs (/tmp, /models) are directories here, and the
# import Job and the export pod get separate /models directories, as separate pods would.
#
#   test/chart/examples_test.sh DFDAEMON_BIN DFCACHE_BIN
# Exit 77 (skip) when not root (mounts), or when node (to read the YAML) is missing.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
examples=$root/charts/dragonfly-csi/examples
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$root/test/chart/lib.sh" examples_test
[ "$(id -u)" = 0 ] || skip "needs root (bind mounts in a private mount namespace)"
need_tools node npm unshare setpriv sha256sum
DFDAEMON_BIN=$(realpath "$1")
DFCACHE_BIN=$(realpath "$2")

if [ -z "${EXAMPLES_TEST_NS:-}" ]; then
    exec env EXAMPLES_TEST_NS=1 unshare -m --propagation private bash "$0" "$DFDAEMON_BIN" "$DFCACHE_BIN"
fi
if [ ! -f "$root/hack/chart/node_modules/.package-lock.json" ]; then
    [ -f "$root/hack/chart/package-lock.json" ] || skip "hack/chart/package-lock.json (the YAML parser) is not in this tree"
fi
npm_ci_chart

work=$(mktemp -d "${TMPDIR:-/tmp}/examples_test.XXXXXX")
chmod 755 "$work"
daemon_pid=
cleanup() {
    if [ -n "$daemon_pid" ]; then
        kill -TERM "$daemon_pid" 2>/dev/null
        wait "$daemon_pid" 2>/dev/null
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# Each example's container: its script (command: [sh, -c, SCRIPT]), env and mount paths.
NODE_PATH=$root/hack/chart/node_modules node - "$examples" "$work" <<'JS' || exit 1
const { parseAllDocuments } = require("yaml");
const fs = require("fs");
const [dir, out] = process.argv.slice(2);
for (const f of fs.readdirSync(dir).filter((f) => f.endsWith(".yaml"))) {
  const name = f.replace(/\.yaml$/, "");
  let n = 0;
  for (const d of parseAllDocuments(fs.readFileSync(`${dir}/${f}`, "utf8")).map((x) => x.toJS())) {
    const spec = d.kind === "Job" ? d.spec.template.spec : d.kind === "Pod" ? d.spec : null;
    if (!spec) continue;
    const c = spec.containers[0];
    if (c.command[0] !== "sh" || c.command[1] !== "-c") {
      console.error(`examples_test: ${f}: the container's command is not [sh, -c, SCRIPT]`);
      process.exit(1);
    }
    fs.writeFileSync(`${out}/${name}.sh`, c.command[2]);
    fs.writeFileSync(`${out}/${name}.env`, (c.env || []).map((e) => `${e.name}=${e.value}\n`).join(""));
    const csi = new Set(spec.volumes.filter((v) => v.csi || v.persistentVolumeClaim).map((v) => v.name));
    const mounts = c.volumeMounts.filter((m) => csi.has(m.name));
    if (mounts.length !== 1 || !mounts[0].readOnly) {
      console.error(`examples_test: ${f}: want one read-only mount of the driver's volume`);
      process.exit(1);
    }
    fs.writeFileSync(`${out}/${name}.mount`, mounts[0].mountPath);
    n++;
  }
  if (n !== 1) { console.error(`examples_test: ${f}: ${n} pods`); process.exit(1); }
}
JS

# A real dfdaemon with its socket directory, as on a node.
mkdir -p "$work/node/run" "$work/node/store"
# Its HTTP endpoints are off: the default ports (4002, 4003) are not this test's to take.
"$DFDAEMON_BIN" --socket-path "$work/node/run/dfdaemon.sock" --storage-dir "$work/node/store" \
    --set metrics.server.port=0 --set health.server.port=0 >"$work/dfdaemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1 1000); do
    [ -S "$work/node/run/dfdaemon.sock.fd" ] && break
    kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/dfdaemon.log" >&2; exit 1; }
    sleep 0.01
done
[ -S "$work/node/run/dfdaemon.sock.fd" ] || { echo "examples_test: dfdaemon did not come up" >&2; exit 1; }
mkdir -p "$work/bin"
ln -s "$DFCACHE_BIN" "$work/bin/dfcache"

# run_pod NAME MODELS_DIR: the example's script as uid 1000, its volume mounted at its path.
run_pod() {
    local name=$1 models=$2 mnt
    mnt=$(cat "$work/$name.mount")
    mkdir -p "$work/pod" "$models"
    chown 1000:1000 "$models"
    # The pod's view: the published socket directory (read-only) at mountPath (on a tmpfs over
    # its parent, private to this namespace) and its own /tmp.
    if ! { mkdir -p "$work/pod/tmp" && chmod 1777 "$work/pod/tmp" &&
        mount -t tmpfs tmpfs "$(dirname "$mnt")" && mkdir -p "$mnt" &&
        mount --bind "$work/node/run" "$mnt" && mount -o remount,bind,ro "$mnt"; }; then
        fail "$name: cannot publish the socket directory at $mnt"
        return 1
    fi
    if touch "$mnt/probe" 2>/dev/null; then
        fail "$name: the published directory is writable"
    fi
    sed "s|/tmp/|$work/pod/tmp/|g; s|/models|$models|g" "$work/$name.sh" >"$work/$name.run.sh"
    local envs=()
    mapfile -t envs < <(sed "s|/models|$models|g" "$work/$name.env")
    # A sanitizer build's options (ctest sets TSan's suppressions) reach dfcache too, with the
    # suppressions file copied where uid 1000 can read it.
    local v o supp
    for v in TSAN_OPTIONS ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do
        o=${!v:-}
        [ -n "$o" ] || continue
        supp=$(sed -n 's/.*suppressions=\([^:]*\).*/\1/p' <<<"$o")
        if [ -n "$supp" ] && [ -r "$supp" ]; then
            install -m 0644 "$supp" "$work/$v.supp"
            o=${o//"suppressions=$supp"/"suppressions=$work/$v.supp"}
        fi
        envs+=("$v=$o")
    done
    env -i PATH="$work/bin:/usr/bin:/bin" "${envs[@]}" \
        setpriv --reuid 1000 --regid 1000 --clear-groups sh "$work/$name.run.sh" >"$work/$name.out" 2>&1
    local rc=$?
    umount "$mnt"
    umount "$(dirname "$mnt")"
    return $rc
}

if run_pod pod-with-pvc "$work/m0"; then
    pvc_id=$(sed -n 's/^Done: //p' "$work/pod-with-pvc.out")
    if [ -n "$pvc_id" ]; then
        ok "pod-with-pvc imported $pvc_id as uid 1000 over a read-only mount"
    else
        fail "pod-with-pvc printed no task id: $(cat "$work/pod-with-pvc.out")"
    fi
else
    fail "pod-with-pvc failed: $(cat "$work/pod-with-pvc.out")"
fi
if run_pod pod-inline-volume "$work/m1" && grep -q "^${pvc_id:-none} " "$work/pod-inline-volume.out"; then
    ok "pod-inline-volume lists the task"
else
    fail "pod-inline-volume: $(cat "$work/pod-inline-volume.out")"
fi
if run_pod job-import-model "$work/m2"; then
    model_id=$(sed -n 's/^Done: //p' "$work/job-import-model.out")
    if [ -n "$model_id" ]; then
        ok "job-import-model imported the model: $model_id"
    else
        fail "job-import-model printed no task id: $(cat "$work/job-import-model.out")"
    fi
else
    fail "job-import-model failed: $(cat "$work/job-import-model.out")"
fi
# The export pod with the job's task id, as its header says (sed on REPLACE-WITH-TASK-ID).
sed -i "s|^TASK_ID=REPLACE-WITH-TASK-ID\$|TASK_ID=${model_id:-none}|" "$work/pod-export-model.env"
if run_pod pod-export-model "$work/m3"; then
    want=$(sha256sum <"$work/m2/model.bin")
    got=$(sha256sum <"$work/m3/model.bin")
    if [ "$want" = "$got" ]; then
        ok "pod-export-model wrote the same bytes, as uid $(stat -c %u "$work/m3/model.bin")"
    else
        fail "pod-export-model: the bytes differ"
    fi
    [ "$(stat -c %u "$work/m3/model.bin")" = 1000 ] || fail "pod-export-model: the file is not the pod user's"
else
    fail "pod-export-model failed: $(cat "$work/pod-export-model.out")"
fi

if [ "$failed" -gt 0 ]; then
    tail -n 20 "$work/dfdaemon.log" >&2
    echo "examples_test: $failed failure(s)" >&2
    exit 1
fi
echo "examples_test: all passed"
