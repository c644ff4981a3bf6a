"""Slack's limits on what a message or view may hold: the one place they are written down.

`bot.slack.render` (building and fitting replies) and `bot.slack.gateway` (fitting the escaped text just
before
it is sent) both read them from here. Sources: the Block Kit reference
(https://api.slack.com/reference/block-kit/blocks, the same numbers slack_sdk checks in
slack_sdk/models/blocks/blocks.py) and chat.postMessage
(https://api.slack.com/methods/chat.postMessage#truncating: the top-level `text` is truncated past 40,000
characters). Two limits are not documented and are kept with a margin below what Slack was seen to refuse.
"""

from __future__ import annotations

# Block Kit (https://api.slack.com/reference/block-kit/blocks).
SECTION_TEXT_LIMIT = 3000  # a section's text, and each text element of a context block
FIELD_TEXT_LIMIT = 2000  # each of a section's fields
FIELDS_LIMIT = 10  # fields per section
HEADER_TEXT_LIMIT = 150  # a header's plain text
CONTEXT_ELEMENTS_LIMIT = 10  # elements per context block
ACTIONS_ELEMENTS_LIMIT = 25  # elements (buttons) per actions block
MESSAGE_BLOCKS_LIMIT = 50  # blocks per message
VIEW_BLOCKS_LIMIT = 100  # blocks per modal or App Home view
CONFIRM_TEXT_LIMIT = 300  # the text of a confirmation dialog
# (https://api.slack.com/reference/block-kit/composition-objects#confirm)

# Not documented: Slack answers `msg_blocks_too_long` at about 13,200 characters of block text in one
# message (https://github.com/slackapi/bolt-js/issues/2509); keep a margin.
MESSAGE_BLOCK_TEXT_LIMIT = 12000
# The top-level text: chat.postMessage truncates it at 40,000 characters, but chat.update answers
# `msg_too_long` far earlier; about 4,000 is what every method accepts.
FALLBACK_TEXT_LIMIT = 3900
