"""On-call: the APScheduler jobs of the bot process (`scheduler`), the checks run on each alert tick
(`checks`), the one claim -> send path of every alert (`delivery`), where alerts go (`routing`),
planned-work windows (`maintenance`), the metrics sampler, reconciliation of creates and follow-ups of
messages that ended early. It may import `bot.commands` (automatic recovery runs
through the runner), `bot.shared`, `bot.slack`, `bot.views`, `bot.config` and `ops`; never a handler.
"""
