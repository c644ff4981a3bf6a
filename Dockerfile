# tpu-chatops: HTTP mode by default (Slack posts to :3000/slack/events); BOT_MODE=socket for Socket Mode.
# Settings come from the environment (see docs/settings.md); no secret is baked into the image.
# The image holds the product only (bot, ops, llm and the locked runtime packages): no simulators, tests,
# benchmarks or dev tools; .dockerignore keeps them, .git, .venv, databases and .env out of the context.
# The base is pinned by tag only: pin it by digest where a registry is reachable (docs/operations.md,
# "Installs and the container image").

FROM python:3.11.7-slim-bookworm AS build
RUN python -m venv /opt/venv
COPY requirements.lock /tmp/requirements.lock
# Exactly the locked tree, every file checked against its hash.
RUN /opt/venv/bin/pip install --no-cache-dir --require-hashes --no-deps -r /tmp/requirements.lock
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY ops ./ops
COPY llm ./llm
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps . && rm -rf /src

FROM python:3.11.7-slim-bookworm
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin bot
COPY --from=build /opt/venv /opt/venv
USER 10001
WORKDIR /home/bot
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 BOT_MODE=http BOT_HOST=0.0.0.0 BOT_PORT=3000
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('BOT_PORT', '3000'), timeout=4)"]
CMD ["python", "-m", "bot", "serve"]
