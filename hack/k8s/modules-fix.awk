# Reorders Kubernetes 1.20's vendor/modules.txt for Go >= 1.17 (docs/k8s-e2e.md, fix 1): a
# wildcard replacement line "# mod => repl" that follows the module's "# mod version => repl"
# header is moved right before that header, so the packages listed under the header belong to
# the versioned module again. Every other line is kept, in order.
FNR == NR {
    if ($1 == "#" && $3 == "=>") wild[$2] = $0
    else if ($1 == "#" && $4 == "=>") versioned[$2] = 1
    next
}
$1 == "#" && $4 == "=>" && ($2 in wild) { print wild[$2] }
$1 == "#" && $3 == "=>" && ($2 in versioned) { next }
{ print }
