#!/usr/bin/env bash
# npm's `prepare` (after `npm ci` / `npm install` in a checkout, and before
# `npm pack`): generate the Prisma client and typed documents, then build
# dist/. `npx baton` run inside a checkout installs that checkout into npx's
# cache as a link, and npm runs `prepare` for a link again: an already-built
# checkout is used as it is there, never rebuilt under a running server or test.
set -euo pipefail
if [ "${npm_command:-}" = "exec" ] && [ -x dist/cli/main.js ]; then exit 0; fi
npm run generate
npm run build
