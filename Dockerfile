# Baton's image: `node dist/bin/server.js` (the API) by default, or
# `node dist/bin/recovery.js` (the recovery loop) as its command.
# Built by docker-compose.yml; no Docker engine runs on the machine Baton is
# developed on, so a test checks this file against the repository instead
# (test/project/docker.test.ts).

# Build: every dependency, Prisma's client, the compiled JavaScript and the
# board's bundle; then drop the development dependencies.
FROM node:20-bookworm-slim AS build
# The lockfile is npm 11's (its allowScripts decide which install scripts run).
RUN npm install -g npm@11 --no-audit --no-fund
WORKDIR /app
COPY package.json package-lock.json prisma.config.ts codegen.ts schema.graphql tsconfig.json tsconfig.build.json ./
COPY prisma ./prisma
COPY scripts ./scripts
COPY test/operations ./test/operations
COPY src ./src
# npm ci's postprepare (scripts/prepare.sh) generates Prisma's client and the typed documents, then
# builds dist/: the API, the CLI, the SDK and the board's page.
RUN npm ci --no-audit --no-fund && npm prune --omit=dev --no-audit --no-fund

# Run: production dependencies, dist/ and the migrations, as the unprivileged
# `node` user. The first SIGTERM (docker stop) drains and exits 0.
FROM node:20-bookworm-slim
ENV NODE_ENV=production HOST=0.0.0.0 PORT=4000
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/prisma ./prisma
USER node
EXPOSE 4000
HEALTHCHECK --interval=5s --timeout=3s --start-period=20s --retries=5 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:4000/readyz').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/bin/server.js"]
