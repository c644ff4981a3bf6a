"""Slack: the Bolt app and the HTTP gate in front of it (`app`), the listeners (`listeners`), the one gateway
for every Web API call, the rendering primitives and Slack's limits, the app manifest and the generated
slash-command list. It owns everything that knows Slack's wire formats. `app` wires the whole bot (it
imports the handlers, which declare the commands, and the on-call jobs), and the listeners open App Home and
the alert buttons through `bot.oncall`; the rest may import `bot.commands`, `bot.config`, `bot.services`,
`bot.views`, `ops` and `llm.redact`. Handlers and views reach Slack only through `render` (blocks) and the
runner (delivery).
"""
