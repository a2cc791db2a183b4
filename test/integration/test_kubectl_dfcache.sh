#!/usr/bin/env bash
# Tests tools/kubectl-dfcache against a `kubectl` stand-in on PATH (kubectl_standin/kubectl)
# and a real dfdaemon: the stand-in records its arguments and runs what it is asked to exec
# with dfcache against the daemon's socket, so file -> kubectl exec -i -> dfcache import -
# (and dfcache export -O - -> file) is a real pipe. Asserts the recorded kubectl arguments,
# the bytes, and each error's message and exit code.
#
#   test_kubectl_dfcache.sh DFDAEMON_BIN DFCACHE_BIN
set -uo pipefail

DFDAEMON_BIN=$(realpath "$1")
DFCACHE_BIN=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
plugin=$here/../../tools/kubectl-dfcache
work=$(mktemp -d "${TMPDIR:-/tmp}/test_kubectl_dfcache.XXXXXX")
daemon_pid=

cleanup() {
    if [[ -n $daemon_pid ]]; then
        kill -TERM "$daemon_pid" 2>/dev/null
        wait "$daemon_pid" 2>/dev/null
    fi
    rm -rf "$work"
}
trap cleanup EXIT

failures=0
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# ---- a real dfdaemon on a socket in $work ----
mkdir -p "$work/run" "$work/store" "$work/bin" "$work/files"
cat >"$work/dfdaemon.yaml" <<YAML
download:
  server:
    socketPath: $work/run/dfdaemon.sock
storage:
  dir: $work/store
metrics:
  server:
    port: 0 # off: the daemons of parallel tests must not compete for 4002
health:
  server:
    port: 0
log:
  level: info
YAML
"$DFDAEMON_BIN" --config "$work/dfdaemon.yaml" >"$work/dfdaemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1 1000); do
    [[ -S $work/run/dfdaemon.sock ]] && break
    kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/dfdaemon.log" >&2; exit 1; }
    sleep 0.01
done
[[ -S $work/run/dfdaemon.sock ]] || { echo "dfdaemon did not come up" >&2; exit 1; }

ln -s "$DFCACHE_BIN" "$work/bin/dfcache"
export DFDAEMON=$work/run/dfdaemon.sock
export STANDIN_BIN=$work/bin
export STANDIN_LOG=$work/kubectl.log
export STANDIN_PODS=$work/pods
export PATH="$here/kubectl_standin:$PATH"
unset KUBECTL
cat >"$STANDIN_PODS" <<PODS
node-a dfdaemon-aaa False
node-b dfdaemon-bbb True
PODS

sel='app.kubernetes.io/name=dragonfly-csi,app.kubernetes.io/component=dfdaemon'
jp='jsonpath={range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}'

# run NAME EXPECTED_CODE ARGS...: runs the plugin, stdout in $out, stderr in $err.
run() {
    local name=$1 want=$2
    shift 2
    : >"$STANDIN_LOG"
    "$plugin" "$@" >"$work/out" 2>"$work/err" </dev/null
    code=$?
    { out=$(<"$work/out"); } 2>/dev/null # may hold the bytes of an export -O -
    err=$(<"$work/err")
    if [[ $code != "$want" ]]; then
        fail "$name: exit $code, want $want (stderr: $err)"
    fi
}
expect_err() { # NAME TEXT
    [[ $err == *"$2"* ]] || fail "$1: stderr lacks \`$2\`: $err"
}
expect_calls() { # NAME LINE...: the stand-in's recorded calls, exactly
    local name=$1
    shift
    local want
    want=$(printf '%s\n' "$@")
    local got
    got=$(cat "$STANDIN_LOG")
    [[ $got == "$want" ]] || fail "$name: kubectl calls
got:  $got
want: $want"
}
get_b="[get][pods][-n][dragonfly][-l][$sel][--field-selector][spec.nodeName=node-b][-o][$jp]"
get_any="[get][pods][-l][$sel][-o][$jp]"

# ---- round trips through the whole pipe: 0 B, 1 B, several pieces ----
head -c 0 /dev/urandom >"$work/files/empty.bin"
head -c 1 /dev/urandom >"$work/files/one.bin"
head -c $((3 * 4 * 1024 * 1024 + 12345)) /dev/urandom >"$work/files/big.bin"
for f in empty one big; do
    src=$work/files/$f.bin
    run "import $f" 0 import "$src" --node node-b -n dragonfly --tag "$f" --no-progress
    [[ $out =~ ^Done:\ ([0-9a-f]{64})$ ]] || fail "import $f: stdout is \`$out\`"
    id=${BASH_REMATCH[1]:-}
    expect_calls "import $f" "$get_b" \
        "[exec][-i][-n][dragonfly][dfdaemon-bbb][-c][dfdaemon][--][dfcache][import][-][--tag][$f][--no-progress]"
    # The id is the content's: the same as dfcache importing the file by path.
    byp=$("$DFCACHE_BIN" import --tag "$f" --no-progress -e "$DFDAEMON" "$src")
    [[ $byp == "Done: $id" ]] || fail "import $f: by path \`$byp\`, through kubectl \`$out\`"

    run "export $f" 0 export "$id" -O "$work/files/$f.out" --node node-b -n dragonfly --tag "$f"
    [[ $out == "Done: $work/files/$f.out" ]] || fail "export $f: stdout is \`$out\`"
    cmp -s "$src" "$work/files/$f.out" || fail "export $f: the bytes differ"
    expect_calls "export $f" "$get_b" \
        "[exec][-n][dragonfly][dfdaemon-bbb][-c][dfdaemon][--][dfcache][export][-O][-][--tag][$f][$id]"

    # -O -: the bytes on standard output, nothing else.
    run "export $f to stdout" 0 export "$id" -O - --tag "$f"
    cmp -s "$src" "$work/out" || fail "export $f -O -: the bytes differ"
    expect_calls "export $f -O -" "$get_any" \
        "[exec][dfdaemon-bbb][-c][dfdaemon][--][dfcache][export][-O][-][--tag][$f][$id]"
done

# import - : the plugin's own standard input goes through.
: >"$STANDIN_LOG"
out=$("$plugin" import - --tag stdin --no-progress <"$work/files/big.bin" 2>"$work/err")
code=$?
[[ $code == 0 && $out == Done:\ * ]] || fail "import -: exit $code, stdout \`$out\`"
stdin_id=${out#Done: }

# stat, ls, rm: dfcache's output and exit codes come through.
run stat 0 stat "$stdin_id" --node node-b
[[ $out == *"$stdin_id"* ]] || fail "stat: stdout lacks the id: $out"
expect_calls stat "[get][pods][-l][$sel][--field-selector][spec.nodeName=node-b][-o][$jp]" \
    "[exec][dfdaemon-bbb][-c][dfdaemon][--][dfcache][stat][$stdin_id]"
run ls 0 ls
[[ $out == *"$stdin_id"* ]] || fail "ls: stdout lacks the id: $out"
run rm 0 rm "$stdin_id"
run "stat after rm" 1 stat "$stdin_id"
expect_err "stat after rm" "dfcache stat:"

# Custom selector and container.
run "selector" 0 ls --selector app=mine --container daemon
expect_calls selector "[get][pods][-l][app=mine][-o][$jp]" \
    "[exec][dfdaemon-bbb][-c][daemon][--][dfcache][ls]"

# ---- errors ----
run "no pod on the node" 1 ls --node node-c
expect_err "no pod on the node" "no dfdaemon pod on node node-c (label $sel, kubectl's current namespace)"
run "pod not ready" 1 ls --node node-a -n dragonfly
expect_err "pod not ready" "pod dfdaemon-aaa on node node-a is not Ready"
[[ $(wc -l <"$STANDIN_LOG") == 1 ]] || fail "pod not ready: kubectl exec ran anyway"
printf 'node-a dfdaemon-aaa False\n' >"$work/pods.unready"
STANDIN_PODS=$work/pods.unready run "no ready pod" 1 ls
expect_err "no ready pod" "no Ready dfdaemon pod (label $sel, kubectl's current namespace; dfdaemon-aaa is not Ready)"
: >"$work/pods.none"
STANDIN_PODS=$work/pods.none run "no pod" 1 ls
expect_err "no pod" "no dfdaemon pod (label $sel"
# A PATH with bash alone: no kubectl (this machine may have a real one in /usr/bin).
mkdir -p "$work/nokubectl"
ln -s "$(command -v bash)" "$work/nokubectl/bash"
PATH=$work/nokubectl run "kubectl missing" 1 ls
expect_err "kubectl missing" "kubectl not found (\`kubectl\` is not on PATH; install kubectl or set KUBECTL)"
KUBECTL=$work/nonexistent run "KUBECTL missing" 1 ls
expect_err "KUBECTL missing" "kubectl not found (\`$work/nonexistent\` is not on PATH"

run "unreadable file" 1 import "$work/files/nope.bin"
expect_err "unreadable file" "cannot read \`$work/files/nope.bin\`"
run "export over a file" 1 export "$id" -O "$work/files/big.out"
expect_err "export over a file" "\`$work/files/big.out\` already exists (use --overwrite)"
run "export --overwrite" 0 export "$id" -O "$work/files/big.out" --overwrite --tag big
cmp -s "$work/files/big.bin" "$work/files/big.out" || fail "export --overwrite: the bytes differ"
run "export of an unknown task" 1 export 0000000000000000000000000000000000000000000000000000000000000000 -O "$work/files/unknown.out"
expect_err "export of an unknown task" "dfcache export:"
[[ ! -e $work/files/unknown.out ]] || fail "a failed export left its output"
compgen -G "$work/files/.kubectl-dfcache.*" >/dev/null && fail "a failed export left a temp file"

run "help" 0 --help
[[ $out == *"Usage: kubectl dfcache <command>"* ]] || fail "help: $out"
[[ ! -s $STANDIN_LOG ]] || fail "help ran kubectl"
run "no command" 2
expect_err "no command" "no command (import, export, stat, ls, rm)"
run "unknown command" 2 cp x
expect_err "unknown command" "unknown command \`cp\`"
run "import without a file" 2 import
expect_err "import without a file" "import takes one FILE"
run "export without -O" 2 export "$id"
expect_err "export without -O" "export needs -O FILE"
run "--node without a value" 2 ls --node
expect_err "--node without a value" "--node needs a value"
run "rm without an id" 2 rm
expect_err "rm without an id" "rm takes one task ID"
[[ ! -s $STANDIN_LOG ]] || fail "a usage error ran kubectl"

if ((failures > 0)); then
    echo "$failures failure(s)" >&2
    exit 1
fi
echo "test_kubectl_dfcache: all passed"
