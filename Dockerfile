# tpu-chatops: HTTP mode by default (Slack posts to :3000/slack/events); BOT_MODE=socket for Socket Mode.
# Settings come from the environment (see README.md "Settings"); no secret is baked into the image.

FROM python:3.11.7-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY ops ./ops
COPY llm ./llm
COPY sim ./sim
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11.7-slim-bookworm
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin bot
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels tpu-chatops==0.1.0 && rm -rf /wheels
USER 10001
WORKDIR /home/bot
ENV PYTHONUNBUFFERED=1 BOT_MODE=http BOT_HOST=0.0.0.0 BOT_PORT=3000
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('BOT_PORT', '3000'), timeout=4)"]
CMD ["python", "-m", "bot", "serve"]
