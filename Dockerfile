# tpu-chatops: HTTP mode by default (Slack posts to :3000/slack/events); BOT_MODE=socket for Socket Mode.
# Settings come from the environment (see docs/settings.md); no secret is baked into the image.
# The image holds the product only (bot, ops, llm and the locked runtime packages): no simulators, tests,
# benchmarks or dev tools; .dockerignore keeps them, .git, .venv, databases and .env out of the context.
# .ci/build-image builds it in CI with buildah (no Docker daemon) and checks all of that on the result.
#
# BASE_IMAGE: any Debian-like image with python3 (3.11-3.13) and its venv module. The default is the
# official image, pinned by the digest of its multi-platform index as docker-library/repo-info lists it
# (repos/python/remote/3.11.16-slim-bookworm.md, image built 2026-09-01; digest read 2026-12-03).
# Refreshing it: docs/operations.md, "Installs and the container image".
ARG BASE_IMAGE=python:3.11.16-slim-bookworm@sha256:c425d915a89a6dcd3183b1797ad9bd8878caff5a417f6371c8df93c8ea8b727f

FROM ${BASE_IMAGE} AS build
# A CA bundle for pip, only where a proxy re-signs HTTPS (.ci/build-image passes the host's); unset: pip's own.
ARG PIP_CERT
COPY requirements.lock /tmp/requirements.lock
# `python3 -m venv`: the official image has python3 in /usr/local/bin, Debian's package in /usr/bin. Exactly
# the locked tree, every file checked against its hash; a layer of its own, so a rebuild with a cache
# (`docker build`, `buildah bud --layers`) that changes only the code reuses it.
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --require-hashes --no-deps \
        -r /tmp/requirements.lock
# The context is what .dockerignore allows: pyproject.toml, README.md, requirements.lock, bot/, ops/, llm/.
COPY . /src
RUN /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps /src

FROM ${BASE_IMAGE}
COPY --from=build /opt/venv /opt/venv
# The venv's python is a link to the base's python3: importing the bot proves it resolves in this stage too.
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin bot \
    && /opt/venv/bin/python -c "import bot.slack.app"
USER 10001
WORKDIR /home/bot
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 BOT_MODE=http BOT_HOST=0.0.0.0 BOT_PORT=3000
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('BOT_PORT', '3000'), timeout=4)"]
CMD ["python", "-m", "bot", "serve"]
