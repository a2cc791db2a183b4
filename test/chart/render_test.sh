#!/usr/bin/env bash
# Tests the chart renderer (hack/chart/render) on the fixture charts in
# test/chart/fixtures/render: the output for each case must equal test/chart/fixtures/render/
# expected/<case>, and each failing case must exit with its code and name the template.
#   test/chart/render_test.sh [BUILD_DIR]      (default build; builds BUILD_DIR/chart-render)
#   UPDATE=1 test/chart/render_test.sh         rewrite the expected files (review the diff!)
# Exit 77 (skip) when Go is missing.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(mkdir -p "${1:-$root/build}" && cd "${1:-$root/build}" && pwd)
fx=$root/test/chart/fixtures/render
render=$build/chart-render
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$root/test/chart/lib.sh" render_test
need_tools go
bash "$root/hack/chart/build-render.sh" "$build" || die "building the renderer failed"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/render_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# expect_output CASE ARGS...: stdout must equal expected/CASE and the exit code 0.
expect_output() {
    local name=$1
    shift
    if ! "$render" "$@" >"$tmp/$name" 2>"$tmp/$name.err"; then
        fail "$name: exit $? ($(head -c 400 "$tmp/$name.err"))"
        return
    fi
    if [ "${UPDATE:-}" = 1 ]; then
        cp "$tmp/$name" "$fx/expected/$name"
    fi
    if diff -u "$fx/expected/$name" "$tmp/$name" >"$tmp/$name.diff"; then
        ok "$name"
    else
        cat "$tmp/$name.diff" >&2
        fail "$name: output differs from test/chart/fixtures/render/expected/$name"
    fi
}

# expect_fail CASE CODE PATTERN ARGS...: exit CODE, nothing on stdout, stderr matches PATTERN.
expect_fail() {
    local name=$1 code=$2 pattern=$3 rc=0
    shift 3
    "$render" "$@" >"$tmp/$name" 2>"$tmp/$name.err" || rc=$?
    if [ "$rc" -ne "$code" ]; then
        fail "$name: exit $rc, want $code ($(head -c 400 "$tmp/$name.err"))"
    elif [ -s "$tmp/$name" ]; then
        fail "$name: printed manifests on a failure"
    elif ! grep -qE -- "$pattern" "$tmp/$name.err"; then
        fail "$name: stderr lacks /$pattern/: $(head -c 400 "$tmp/$name.err")"
    else
        ok "$name"
    fi
}

b=$fx/basic
# Defaults: include/nindent/toYaml, tpl, .Template, .Release, .Chart, .Capabilities, fromYaml,
# fromJson, lookup, missing keys print nothing, partials (_*.tpl and _*.yaml) not rendered,
# the whitespace-only template dropped, a comment-only template kept (as Helm keeps it), Service
# before Deployment.
expect_output default --chart "$b"
# Two -f files over values.yaml: deep merge, the later file wins, null deletes a default.
expect_output values --chart "$b" -f "$b/override.yaml" --values "$b/override2.yaml"
# --set typing (int, bool, string with a leading zero, null deletes), escaped commas, list
# indexes, lists in braces, --set over -f, --set-string.
expect_output set --chart "$b" -f "$b/override.yaml" \
    --set 'replicas=7,image.tag=v2,optional.feature=true' --set 'labels.extra=a\,b' \
    --set 'extraEnv[1].name=B,extraEnv[1].value=x' --set 'labels.list={x,y}' \
    --set 'port=0123,labels.tier=null' --set-string 'big=42'
# Capabilities and release flags.
expect_output caps --chart "$b" --kube-version v1.24.3 --api-versions monitoring.coreos.com/v1 \
    --name rel --namespace ns
expect_output notes --chart "$b" --name rel --notes
# --lookup: lookup finds the objects of the file (by apiVersion, kind, namespace and name).
expect_output lookup --chart "$b" --lookup "$fx/lookup.yaml"

f=$fx/failing
expect_output failing-ok --chart "$f"
expect_fail required 1 'failing/templates/pod.yaml.*image.repository is required' --chart "$f" --set mode=required
expect_fail badyaml 1 'YAML parse error on failing/templates/pod.yaml' --chart "$f" --set mode=badyaml
expect_fail fail 1 'failing/templates/pod.yaml.*mode fail was asked for' --chart "$f" --set mode=fail
expect_fail parse-error 1 'parse error in parseerror/templates/broken.yaml' --chart "$fx/parseerror"
expect_fail no-chart-dir 1 'Chart.yaml' --chart "$tmp/none"
expect_fail bad-flag 2 'flag provided but not defined: -bogus' --chart "$b" --bogus
expect_fail no-chart 2 '--chart DIR is required'
expect_fail bad-kube-version 2 'kube-version' --chart "$b" --kube-version 1
expect_fail bad-set 1 'has no value' --chart "$b" --set replicas
expect_fail missing-values-file 1 'nope.yaml' --chart "$b" -f "$tmp/nope.yaml"
expect_fail missing-lookup-file 1 'lookup.*nope.yaml' --chart "$b" --lookup "$tmp/nope.yaml"

# What the renderer does not implement it refuses (exit 1, naming it), never renders a guess
# that could differ from helm template: the template functions it lacks, and the chart files
# whose meaning it lacks, each added to a copy of a chart that renders on its own.
u=$fx/unsupported
expect_output unsupported-ok --chart "$u"
expect_fail toToml 1 'unsupported/templates/cm.yaml.*toToml is not implemented' --chart "$u" --set mode=toToml
expect_fail getHostByName 1 'getHostByName is not implemented' --chart "$u" --set mode=getHostByName
expect_fail asSecrets 1 'AsSecrets is not implemented' --chart "$u" --set mode=asSecrets
refuse() {
    local name=$1 pattern=$2
    shift 2
    rm -rf "$tmp/chart" && cp -r "$u" "$tmp/chart" && (cd "$tmp/chart" && eval "$*")
    expect_fail "$name" 1 "$pattern" --chart "$tmp/chart"
}
refuse dependencies 'Chart.yaml: dependencies are not supported' \
    'printf "dependencies:\n  - name: redis\n    version: 1.0.0\n" >>Chart.yaml'
refuse subcharts 'charts: subcharts are not supported' 'mkdir -p charts/sub'
refuse requirements 'requirements.yaml: dependencies .apiVersion v1. are not supported' \
    'echo "dependencies: []" >requirements.yaml'
# values.schema.json is checked against the coalesced values, as Helm does: values that meet it
# render as without it (and the schema is not among .Files); each failure is listed, nothing
# rendered.
schema='{"type": "object", "properties": {"mode": {"type": "string", "enum": ["none", "files"]},
  "extra": {"type": "object", "additionalProperties": false, "properties": {"n": {"type": "integer"}}}}}'
rm -rf "$tmp/chart" && cp -r "$u" "$tmp/chart" && printf '%s\n' "$schema" >"$tmp/chart/values.schema.json"
expect_output unsupported-ok --chart "$tmp/chart"
expect_fail schema-enum 1 "values don't meet the specifications of the schema.*" --chart "$tmp/chart" --set mode=other
expect_fail schema-lists 1 '^- extra.n: Invalid type. Expected: integer, given: string' \
    --chart "$tmp/chart" --set-string extra.n=x
expect_fail schema-additional 1 '^- extra: Additional property bogus is not allowed' \
    --chart "$tmp/chart" --set extra.bogus=1
if "$render" --chart "$tmp/chart" --set mode=files 2>&1 | grep -q 'values.schema.json'; then
    fail "schema-not-a-file: values.schema.json is among .Files"
else
    ok "schema-not-a-file"
fi
printf '{"type": ' >"$tmp/chart/values.schema.json"
expect_fail schema-broken 1 'unsupported/values.schema.json' --chart "$tmp/chart"
# .helmignore is applied as Helm applies it: a directory rule skips the tree, a base-name glob
# matches at any depth, hidden files under templates/ are always left out; ** is refused.
rm -rf "$tmp/chart" && cp -r "$u" "$tmp/chart" && mkdir -p "$tmp/chart/sub" "$tmp/chart/deep" &&
    printf '# comment\nsub/\n*.md\n' >"$tmp/chart/.helmignore" && touch "$tmp/chart/sub/a.txt" \
        "$tmp/chart/doc.md" "$tmp/chart/deep/b.md" "$tmp/chart/keep.txt" &&
    echo 'kind: [unclosed' >"$tmp/chart/templates/.hidden.yaml"
expect_output helmignore --chart "$tmp/chart" --set mode=files
echo 'a/**/b' >"$tmp/chart/.helmignore"
expect_fail helmignore-doublestar 1 'double-star' --chart "$tmp/chart"
refuse crds 'crds: CRD directories are not supported' 'mkdir crds && echo "kind: X" >crds/x.yaml'

echo "render_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
