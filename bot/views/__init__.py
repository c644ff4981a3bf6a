"""Rendering of the bot's results as Slack text and blocks, one module per kind of thing shown.

Handlers gather data (the ops types, or a view's input dataclass) and call a view; views compute nothing
from backends. `bot.render` keeps the Slack primitives (Reply, blocks, limits, mentions, links, escaping).

- `tpu`: queued-resource lines, /tpu describe, the /tpu status dashboard.
- `metrics`: vLLM metrics lines, latencies, the metrics-history chart reply.
- `cost`: money, price estimates and their sources, a preview's spend lines.
- `findings`: the diagnosis (known failures, fixes, key lines) as every command and alert shows it.
- `help`: the command list and the active settings.
"""
