"""Cloud TPU: the client for queued resources and nodes (`api`) and their typed view (`model`, with the line
of the bot's SSH key a node it creates carries), the capacity search across zones, zone names, ownership
labels and creates that survive ambiguous answers, recovery of a dead primary and the host maintenance
Google announces on a node. It may import `ops.gcp` (clients, errors), `ops.store`, `ops.alerts` (alert
values), `ops.diagnosis` and the pure helpers of `ops` (errors, times and durations, linear); never `bot` or
`llm`.
"""
