#!/usr/bin/env bash
# Formats the project's C sources with the repo's .clang-format, and the chart renderer's Go
# sources (hack/chart/render) with gofmt when Go is installed.
#   hack/format.sh           rewrite files in place
#   hack/format.sh --check   fail (exit 1) and list the files that are not formatted
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t gofiles < <(git ls-files --cached --others --exclude-standard -- 'hack/chart/render/*.go')
if [ ${#gofiles[@]} -gt 0 ] && command -v gofmt >/dev/null; then
    if [ "${1:-}" = "--check" ]; then
        mapfile -t badgo < <(gofmt -l "${gofiles[@]}")
        if [ ${#badgo[@]} -gt 0 ]; then
            echo "format: not gofmt-formatted (run hack/format.sh):" >&2
            printf '  %s\n' "${badgo[@]}" >&2
            exit 1
        fi
    else
        gofmt -w "${gofiles[@]}"
    fi
fi

mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.c' '*.h')
if [ ${#files[@]} -eq 0 ]; then
    exit 0
fi

if [ "${1:-}" = "--check" ]; then
    bad=()
    for f in "${files[@]}"; do
        if ! clang-format --style=file "$f" | cmp -s - "$f"; then
            bad+=("$f")
        fi
    done
    if [ ${#bad[@]} -gt 0 ]; then
        echo "format: not clang-formatted (run hack/format.sh):" >&2
        printf '  %s\n' "${bad[@]}" >&2
        exit 1
    fi
    echo "format: ${#files[@]} files clean"
else
    clang-format --style=file -i "${files[@]}"
fi
