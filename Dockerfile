# syntax=docker/dockerfile:1
# The a2a-grpc server image: `docker build -t a2a-grpc .` (from the repository root, the build context that
# .dockerignore trims). The builder installs the project with its postgres and fast (uvloop) extras into a
# virtualenv; the image keeps that virtualenv only (no pip cache, no build tools, no source tree) and runs
# `a2a-grpc serve` as an unprivileged user, listening on every interface of the container.
# Deployment notes (Kubernetes, TLS in front, readiness): docs/operations.md, "Deploying"; deploy/ has the manifests.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
RUN python -m venv /opt/a2a-grpc
WORKDIR /src
# interceptors/ is installed as a2a_grpc.interceptors (pyproject's package-dir mapping)
COPY pyproject.toml README.md LICENSE ./
COPY interceptors ./interceptors
COPY a2a_grpc ./a2a_grpc
RUN /opt/a2a-grpc/bin/pip install ".[postgres,fast]" \
    && /opt/a2a-grpc/bin/a2a-grpc serve --help >/dev/null

FROM ${PYTHON_IMAGE}
# The same base image: the virtualenv's python is a link to /usr/local/bin/python3 of this image.
RUN groupadd --system --gid 10001 a2a \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/a2a-grpc --shell /usr/sbin/nologin a2a \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/a2a-grpc
COPY --from=builder /opt/a2a-grpc /opt/a2a-grpc
ENV PATH=/opt/a2a-grpc/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    A2A_GRPC_LISTEN=0.0.0.0:50051 \
    A2A_GRPC_HTTP_LISTEN=0.0.0.0:8080 \
    A2A_GRPC_STORE=sqlite:////var/lib/a2a-grpc/tasks.db
# numeric, so that Kubernetes' runAsNonRoot can check it
USER 10001:10001
WORKDIR /var/lib/a2a-grpc
# gRPC (A2A, grpc.health.v1, reflection) and HTTP (the agent card)
EXPOSE 50051 8080
# SIGTERM drains: health goes NOT_SERVING, calls in flight get A2A_GRPC_GRACE seconds (10 by default)
STOPSIGNAL SIGTERM
ENTRYPOINT ["a2a-grpc", "serve"]
