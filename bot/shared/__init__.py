"""What several handlers share, so that no handler imports another: the safety of changing commands (one
operation per name, previews), what a queued resource to create is made of, recovery of a dead one, the
diagnosis as every command shows it (a Slack refusal of the alert channel included) and who wrote what
beside it (the line under model text, the "rules only" note), hints built from the registry, whether vLLM
can take a command, what `/fleet` knows of a deployment and the zone plan. (A deployment's backends, the
fan-out of a reply's sources and who answers on the vLLM port are `bot.services`.) It may import
`bot.commands` (registry, context), `bot.services`, `bot.oncall` (recovery opens a planned-work window),
`bot.slack` (render, the gateway's refusals), `bot.views`, `bot.chat` (the commands run, read from the
audit trail), `bot.config`, `ops` and `llm`; never `bot.handlers`.
"""
