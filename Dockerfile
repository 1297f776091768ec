# syntax=docker/dockerfile:1
# The one kubenode image, for both DaemonSets (deploy/deviceplugin-daemonset.yaml, deploy/agent-daemonset.yaml):
#   docker build -t ghcr.io/kubenode/kubenode:0.1.0 .
# The tag is the version in pyproject.toml; tests/test_image.py checks that the manifests name exactly this
# image and run its entrypoint. (It is not built in this project's CI machine, which has no container daemon.)

# Build stage: a venv with kubenode and its dependencies, from wheels; no compilers reach the final image.
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/kubenode
WORKDIR /src
COPY pyproject.toml README.md ./
COPY kubenode ./kubenode
COPY deviceplugin ./deviceplugin
COPY agent ./agent
COPY conformance ./conformance
COPY scheduler ./scheduler
COPY apiserver ./apiserver
RUN /opt/kubenode/bin/pip install . && /opt/kubenode/bin/kubenode --version

# Final stage: the same slim Python base (the venv's interpreter path is identical), the venv and nothing else.
FROM python:3.11-slim-bookworm
LABEL org.opencontainers.image.title="kubenode" \
      org.opencontainers.image.source="https://github.com/kubenode/kubenode" \
      io.kubenode.image="ghcr.io/kubenode/kubenode"
COPY --from=build /opt/kubenode /opt/kubenode
ENV PATH=/opt/kubenode/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# Non-root by default: `kubenode scheduler simulate`, `conformance --plugin-cmd` and `--version` need no
# privilege. The DaemonSets set runAsUser: 0, because writing cgroups and the kubelet's root-owned
# device-plugin directory needs root (65532 is the "nonroot" user of distroless images).
RUN useradd --system --uid 65532 --no-create-home --shell /usr/sbin/nologin nonroot
USER 65532:65532
ENTRYPOINT ["kubenode"]
CMD ["--help"]
