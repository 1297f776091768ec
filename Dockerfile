# syntax=docker/dockerfile:1
# The one kubenode image, for both DaemonSets (deploy/deviceplugin-daemonset.yaml, deploy/agent-daemonset.yaml):
#   make image                                   # base made here from Debian's packages (tools/image.py)
#   make image BASE=python:3.11-slim-bookworm    # the same lines on a registry's base
# Both tag it ghcr.io/kubenode/kubenode:0.1.0 (the version in pyproject.toml); tests/test_image.py builds it,
# runs the DaemonSets' containers from it, and checks that the manifests name exactly this image.
# The build context holds only wheels/: kubenode and its dependencies, built on the host by tools/image.py
# (pip in a build container sees neither the host's index nor its certificates).

# Any Debian-based image with python3 and its venv module: the base made by tools/image.py (mmdebstrap
# bookworm minbase + python3, python3-venv) or python:3.11-slim-bookworm from a registry.
ARG BASE=python:3.11-slim-bookworm

# Build stage: a venv with kubenode and its dependencies from the wheels; no index, no compilers.
FROM ${BASE} AS build
# tools/image.py removes this stage's image after the build (podman keeps it otherwise).
LABEL io.kubenode.stage=build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/kubenode
COPY wheels /wheels
RUN /opt/kubenode/bin/pip install --no-index --find-links /wheels kubenode && /opt/kubenode/bin/kubenode --version

# Final stage: the same base (the venv's interpreter path is identical), the venv and nothing else.
FROM ${BASE}
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
