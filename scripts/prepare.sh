#!/usr/bin/env bash
# npm's `postprepare` (after `npm ci` / `npm install` in a checkout, and in
# npm's clone of the repository when it is installed from a git URL) and
# `prepack` (before `npm pack`): generate the Prisma client and typed
# documents, then build dist/. Neither hook is an install script of the
# packed package, so installing the tarball runs nothing of Baton's.
set -euo pipefail
npm run generate
npm run build
