#!/usr/bin/env bash
# make-certs.sh - a CA and leaf certificates for TLS tests and the local cluster, in
# cert-manager's Secret layout (ca.crt, tls.crt, tls.key). ECDSA P-256, openssl CLI only.
#
#   make-certs.sh ca CADIR                       CADIR/ca.crt, CADIR/ca.key (a new CA)
#   make-certs.sh leaf CADIR OUTDIR SAN [OPTS]   OUTDIR/{ca.crt,tls.crt,tls.key}
#       SAN: an openssl subjectAltName value, e.g. "IP:127.0.0.2,URI:dragonfly://host/<id>"
#       OPTS: --cn NAME (default: dfc-leaf), --days N (default 365),
#             --expired (valid from 3 days ago until yesterday)
set -euo pipefail

die() {
    echo "make-certs.sh: $*" >&2
    exit 2
}

cmd=${1:-}
case "$cmd" in
ca)
    [ $# -eq 2 ] || die "usage: make-certs.sh ca CADIR"
    dir=$2
    mkdir -p "$dir"
    openssl ecparam -name prime256v1 -genkey -noout -out "$dir/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$dir/ca.key" -sha256 -days 3650 -subj "/CN=dfc-test-ca" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$dir/ca.crt" 2>/dev/null
    chmod 600 "$dir/ca.key"
    ;;
leaf)
    [ $# -ge 4 ] || die "usage: make-certs.sh leaf CADIR OUTDIR SAN [--cn NAME] [--days N] [--expired]"
    ca=$2 out=$3 san=$4
    shift 4
    cn=dfc-leaf days=365 expired=0
    while [ $# -gt 0 ]; do
        case "$1" in
        --cn) cn=$2; shift 2 ;;
        --days) days=$2; shift 2 ;;
        --expired) expired=1; shift ;;
        *) die "unknown option $1" ;;
        esac
    done
    if [ ! -r "$ca/ca.crt" ] || [ ! -r "$ca/ca.key" ]; then
        die "no CA in $ca (make-certs.sh ca $ca)"
    fi
    mkdir -p "$out"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    openssl ecparam -name prime256v1 -genkey -noout -out "$out/tls.key" 2>/dev/null
    chmod 600 "$out/tls.key"
    openssl req -new -key "$out/tls.key" -subj "/CN=$cn" -out "$tmp/req.csr" 2>/dev/null
    cat >"$tmp/ext.cnf" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san
EXT
    if [ "$expired" = 1 ]; then
        # `openssl x509 -req` (3.0) cannot back-date; `openssl ca` can.
        mkdir -p "$tmp/db"
        : >"$tmp/db/index.txt"
        echo 01 >"$tmp/db/serial"
        cat >"$tmp/ca.cnf" <<CNF
[ca]
default_ca = d
[d]
database = $tmp/db/index.txt
serial = $tmp/db/serial
new_certs_dir = $tmp/db
default_md = sha256
policy = p
copy_extensions = none
[p]
commonName = supplied
CNF
        openssl ca -batch -config "$tmp/ca.cnf" -cert "$ca/ca.crt" -keyfile "$ca/ca.key" \
            -startdate "$(date -u -d '3 days ago' +%Y%m%d%H%M%SZ)" \
            -enddate "$(date -u -d '1 day ago' +%Y%m%d%H%M%SZ)" \
            -extfile "$tmp/ext.cnf" -in "$tmp/req.csr" -out "$out/tls.crt" >/dev/null 2>&1 ||
            die "openssl ca failed"
    else
        openssl x509 -req -in "$tmp/req.csr" -CA "$ca/ca.crt" -CAkey "$ca/ca.key" \
            -CAcreateserial -CAserial "$tmp/ca.srl" -days "$days" -sha256 \
            -extfile "$tmp/ext.cnf" -out "$out/tls.crt" 2>/dev/null
    fi
    cp "$ca/ca.crt" "$out/ca.crt"
    ;;
*)
    die "usage: make-certs.sh ca CADIR | leaf CADIR OUTDIR SAN [--cn NAME] [--days N] [--expired]"
    ;;
esac
