#!/usr/bin/env bash
# Refuses the C library calls the house style bans (curl's list): unbounded or non-reentrant
# string, number and time functions. Prints each use and exits 1 when there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
banned='\b(sprintf|vsprintf|strcpy|strcat|strncpy|strncat|strtok|atoi|atol|atoll|gets|localtime|gmtime|ctime|asctime|strerror|tmpnam)\s*\('
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.c' '*.h')
if hits=$(grep -nE "$banned" "${files[@]}" | grep -vE '^\S+:[0-9]+:\s*(/\*|\*)'); then
    echo "lint: banned functions (use snprintf, strlcpy-style code, strtol/dfc_parse_*, *_r):" >&2
    echo "$hits" >&2
    exit 1
fi
echo "lint: ${#files[@]} files, no banned functions"
