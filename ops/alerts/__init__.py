"""Alerts as data and rules: one alert to post (`alert`), pure evaluation of what is due and the exactly-once
ledger (`ledger`), where open alerts stand against the resources listed now, by identity (`placement`), the
channels Slack refused and the alerts held back (`outbox`), and planned-work windows that are not incidents
(`planned`). It may import `ops.store`, `ops.tpu`, `ops.vllm` (watch), `ops.diagnosis` and the pure helpers
of `ops`; never `bot` or `llm`.
"""
