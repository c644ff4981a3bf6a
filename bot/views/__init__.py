"""Rendering of the bot's results as Slack text and blocks, one module per kind of thing shown.

Handlers gather data (the ops types, or a view's input dataclass) and call a view; views compute nothing
from backends. Blocks are slack_sdk's block models (`slack_sdk.models.blocks`), through `bot.slack.render`'s
primitives (Reply, blocks, mentions, links, escaping); Slack's limits are in `bot.slack.limits`. No module
under `bot/handlers` builds blocks (tests/unit/test_handlers_gather.py).

- `tpu`: queued-resource lines, /tpu describe, /tpu status, capacity (zones, searches); `fleet`: /fleet.
- `lifecycle`: previews and results of create, delete, reset, start, stop, ensure and recover.
- `vllm`: the vLLM server's endpoints and its container (status, logs, journal).
- `metrics`: vLLM metrics lines, latencies, the metrics-history chart reply, benchmarks.
- `cost`: money, price estimates and their sources, a preview's spend lines.
- `findings`: the diagnosis (known failures, fixes, key lines) as every command and alert shows it.
- `admin`: the audit trail, the Hugging Face token form, help (the command list, the active settings).
- `gemma`, `chat`: Gemma's answers, their stats and ratings; grounded chat answers.
- `logs`, `alerts`: the log listing and analysis, alert rules and messages.
"""
