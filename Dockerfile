# syntax=docker/dockerfile:1
# iop-edge image: the edge gateway and, as a second entrypoint, the status exporter.
#   docker build -t iop-edge .
#   docker run --rm -p 8080:8080 -v "$PWD/edge.yaml:/etc/iop-edge/edge.yaml:ro" iop-edge
#   (with CLI models add --security-opt seccomp=unconfined --security-opt apparmor=unconfined
#    --security-opt systempaths=unconfined: their sandbox, bwrap, needs user namespaces and its own /proc)
#   docker run --rm -p 9464:9464 -e REDIS_URL=redis://redis:6379 -v "$PWD/edge.yaml:/etc/iop-edge/edge.yaml:ro" iop-edge status-exporter
# README "Running a fleet". The runtime stage is reproduced outside Docker by tools/fleet/src/dockerfile.spec.ts.

# ---- build: the whole workspace, dev dependencies included, builds dist/ with Nx ----
# Both stages use the same Node 20 base (the test checks it): bump them together.
FROM node:20-bookworm-slim AS build
WORKDIR /src
ENV NX_DAEMON=false NX_NO_CLOUD=true NX_SKIP_NX_CACHE=true
# Manifests first, so the dependency layer is rebuilt only when they change.
COPY package.json package-lock.json ./
COPY apps/edge-gateway/package.json apps/edge-gateway/
COPY apps/status-exporter/package.json apps/status-exporter/
COPY libs/dispatch/package.json libs/dispatch/
COPY libs/errors/package.json libs/errors/
COPY libs/runtime/package.json libs/runtime/
COPY libs/status/package.json libs/status/
COPY libs/validate/package.json libs/validate/
COPY tools/bench/package.json tools/bench/
COPY tools/fake-upstream/package.json tools/fake-upstream/
RUN npm ci --no-audit --no-fund
COPY . .
RUN npx nx run-many -t build -p edge-gateway status-exporter --output-style=static

# ---- runtime: dist/ and production dependencies only, non-root, under tini ----
FROM node:20-bookworm-slim AS runtime
# tini is PID 1: it forwards SIGTERM to node (graceful drain) and reaps the processes CLI adapters fork.
# bubblewrap runs every CLI program in a sandbox (README "Security": gateway.cli_sandbox).
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini bubblewrap \
  && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
COPY apps/edge-gateway/package.json apps/edge-gateway/
COPY apps/status-exporter/package.json apps/status-exporter/
COPY libs/dispatch/package.json libs/dispatch/
COPY libs/errors/package.json libs/errors/
COPY libs/runtime/package.json libs/runtime/
COPY libs/status/package.json libs/status/
COPY libs/validate/package.json libs/validate/
COPY tools/bench/package.json tools/bench/
COPY tools/fake-upstream/package.json tools/fake-upstream/
# valibot (under @bull-board/api) lists TypeScript as an optional peer, which npm keeps from the lock
# file even with --omit=dev; it only serves type checking, so it leaves the image.
RUN npm ci --omit=dev --no-audit --no-fund \
  && rm -rf node_modules/typescript \
  && npm cache clean --force
COPY --from=build /src/dist/apps/edge-gateway dist/apps/edge-gateway
COPY --from=build /src/dist/apps/status-exporter dist/apps/status-exporter
COPY deploy/docker/bin bin
COPY examples examples
ENV PATH=/app/bin:$PATH
# The image's user "node" (uid 1000) owns nothing in /app: the code is read-only to the process.
USER node
# 8080: gateway (OpenAI API, /healthz, /readyz, /status, /metrics); 9464: status exporter.
EXPOSE 8080 9464
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["edge-gateway", "--config", "/etc/iop-edge/edge.yaml", "--listen", "0.0.0.0:8080"]
