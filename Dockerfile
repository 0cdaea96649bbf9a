# syntax=docker/dockerfile:1
# The kvcrud container image, in two stages: compile the TypeScript and trace the files the
# service loads at run time; a runtime stage with only those. Every stage starts from the exact
# Node release the tests run on (the `node` devDependency in package-lock.json;
# test/image/dockerfile.test.ts keeps the two equal).

FROM node:24.21.0-trixie-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# No install scripts: package.json allows none that the build needs, and the `node`
# devDependency's script would fetch a second Node. The base image's Node compiles.
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN node node_modules/typescript/bin/tsc -p tsconfig.build.json && rm dist/.tsbuildinfo
# Of node_modules, only what dist/index.js can load (@vercel/nft): 294 MB of production
# dependencies become 44 MB (test/image/runtime-files.test.ts runs such a copy on every store).
COPY scripts/trace-runtime.ts ./scripts/
RUN node scripts/trace-runtime.ts /runtime

FROM node:24.21.0-trixie-slim
LABEL org.opencontainers.image.title="kvcrud" \
      org.opencontainers.image.description="HTTP/JSON gateway to wide-column data stores" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /runtime ./
# The base image's `node` user, by number so that Kubernetes can verify runAsNonRoot. The service
# writes nothing to the image's filesystem, so the root filesystem may be mounted read-only; the
# embedded store writes only to DATA_DIR, a mounted volume.
USER 1000:1000
EXPOSE 8080
# Exec form: Node runs as PID 1 and gets SIGTERM itself (no shell in between). It handles SIGTERM
# and SIGINT (graceful drain, see src/shutdown.ts) and starts no child processes, so it needs no
# init process to forward signals or reap zombies. The same command as `npm run serve`.
CMD ["node", "--enable-source-maps", "dist/index.js"]
