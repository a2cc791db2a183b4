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
# The environment is read in one place, the option module (lib/src/options.c), so every
# variable is a schema row with a flag, a default and a --help line (dfc/config.h).
if hits=$(grep -nE '\b(secure_)?getenv\s*\(' "${files[@]}" | grep -v '^lib/src/options\.c:' |
    grep -vE '^\S+:[0-9]+:\s*(/\*|\*)'); then
    echo "lint: getenv outside lib/src/options.c (declare a schema row with .env instead):" >&2
    echo "$hits" >&2
    exit 1
fi
echo "lint: ${#files[@]} files, no banned functions, getenv only in lib/src/options.c"
