#!/usr/bin/env bash
# Installs the agent CLIs pinned in package-lock.json into node_modules/ here,
# for the real-CLI integration tests (integration/realcli_test.go). An install
# made from the same lockfile is reused; anything else is replaced by npm ci.
# Needs npm (Node.js 20 or later: Gemini CLI requires it) and the npm registry.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v npm >/dev/null; then
	echo "realcli: npm not found: install Node.js 20 or later (the real-CLI tests need it)" >&2
	exit 1
fi
stamp=node_modules/.supervise-lockfile
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp" &&
	[ -x node_modules/.bin/claude ] && [ -x node_modules/.bin/codex ] && [ -x node_modules/.bin/gemini ]; then
	echo "realcli: reusing the install in $(pwd)/node_modules (same lockfile)"
else
	npm ci --no-audit --no-fund --loglevel=error
	cp package-lock.json "$stamp"
fi
for cli in claude codex gemini; do
	printf 'realcli: %s %s\n' "$cli" "$(node_modules/.bin/$cli --version </dev/null 2>&1 | head -1)"
done
