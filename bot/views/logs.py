"""`/logs` and `/logs analyze` as Slack blocks: the entries listing, and the analysis (the read's size and
sampling, the top error kinds, the findings placed against the serving container, the model's analysis)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from bot.slack.limits import MESSAGE_BLOCK_TEXT_LIMIT, SECTION_TEXT_LIMIT
from bot.slack.render import (
    Attachment,
    Block,
    Reply,
    blocks_reply,
    code,
    context,
    header,
    human_duration,
    plural,
    section,
    split_sections,
    to_mrkdwn,
    utc,
)
from bot.views.findings import diagnosis_text
from llm.logsum import FOLD_WINDOW_S, Analysis, TemplateSummary
from ops.diagnosis.engine import Diagnosis, ServingNow, is_fatal, template_note
from ops.diagnosis.families import is_exception_line, is_traceback_line
from ops.errors import OpsError
from ops.gcp.cloudlogs import LogEntry
from ops.gcp.logplan import ReadReport

SECTION_ROOM = SECTION_TEXT_LIMIT - 200
"""Characters of a section of `/logs analyze` as Slack receives it: under Block Kit's 3,000, leaving room
for what redaction may add."""
MESSAGE_ROOM = MESSAGE_BLOCK_TEXT_LIMIT - 1200
"""Characters of all of its blocks together: under the limit of a message's block text, leaving room for the
blocks added after the view (the deployment's label, the Slack gateway's notes on files)."""
LEFT_OUT_ROOM = 120
"""Room kept in a cut section for the line that says what was left out."""
ANALYSIS_FILE = "log-analysis.txt"
LINE_CHARS = 160
"""Characters of a message line `/logs` shows: with its 40-character prefix (time, severity, node), a line
of a code block that stays readable in Slack's message pane."""
LINE_WORD_CHARS = 40
"""How far back from LINE_CHARS a cut looks for a space before it cuts inside a long token."""
LISTING_FILE = "log-entries.txt"
TEMPLATE_CHARS = 150
"""Characters of a template in a top error kind's line (every template is whole in log-templates.tsv)."""
TRACEBACK_HEADER = "Traceback (most recent call last):"
"""The line Python starts a traceback with (https://docs.python.org/3/library/traceback.html)."""


@dataclass(frozen=True)
class LogWindow:
    """What a `/logs` read asked Cloud Logging for, as the user gave it.

    Attributes:
        span: how far back, e.g. timedelta(hours=1); start: the window's first moment (aware UTC).
        severity: the minimum LogSeverity name, or None for every severity.
        node: the TPU node id, or None for every node.
        text: the user's extra Logging query (`--filter`), or None.
        query: the exact Cloud Logging query sent (`ops.gcp.cloudlogs.build_filter`).
        show_query: the user asked for `query` (`--query`).
        hints: whether the footer says how to see more (`--query`): False for a chat tool's result, which
            is read by the model, not by a person typing commands (`bot.commands.context.Context.for_model`).
    """

    span: timedelta
    start: datetime
    severity: str | None
    node: str | None
    text: str | None
    query: str
    show_query: bool = False
    hints: bool = True

    def described(self) -> str:
        """The window in a line, e.g. "last 1h (since 2026-11-29 11:30 UTC) · ERROR and above · every node
        · TPU VM and vLLM container logs"; the user's `--filter` text is quoted as given."""
        parts = [
            f"last {human_duration(self.span).removesuffix(' 00m')} (since {utc(self.start)})",
            f"{self.severity} and above" if self.severity else "every severity",
            f"node `{self.node}`" if self.node else "every node",
            "TPU VM and vLLM container logs",
        ]
        if self.text:
            parts.append(f"matching `{self.text}`")
        return " · ".join(parts)

    def wider(self) -> str:
        """What to try when the window holds nothing: each restriction it had loosened, e.g. "Try a
        longer `--since` (e.g. `--since 6h`), without `--severity`"."""
        hours = max(6, round(self.span.total_seconds() * 4 / 3600))
        tries = [f"a longer `--since` (e.g. `--since {hours}h`)"]
        if self.severity:
            tries.append("without `--severity`")
        if self.text:
            tries.append("without `--filter`")
        if self.node:
            tries.append("another `--node`, or none (`/tpu list` names the nodes)")
        return "Try " + ", ".join(tries) + "."

    def footer(self) -> str:
        """The listing's footer: the description, then the exact query when asked for, else how to see it
        (without `hints`: the description alone, its parts joined as a sentence's)."""
        if self.show_query:
            return f"{self.described()}\nCloud Logging query: `{self.query}`"
        if not self.hints:
            return self.described().replace(" · ", ", ")
        return f"{self.described()} · `--query` shows the exact Cloud Logging query"


def entries_listing(entries: Sequence[LogEntry], window: LogWindow) -> Reply:
    """`/logs`: the entries newest first, in as many sections as needed, then what was read
    (`LogWindow.footer`); "no entries" describing the window when there are none.

    An entry's lines keep their order, and the lines of one traceback (one entry each, as docker and vLLM
    write them) are shown in log order under the newest-first order of the tracebacks (`entry_groups`).
    A line longer than LINE_CHARS is cut at a word boundary and marked "…"; every line is then whole in the
    attached LISTING_FILE.
    """
    if not entries:
        return blocks_reply([section("No log entries match: " + window.footer()), context(window.wider())])
    shown: list[str] = []
    whole: list[str] = []
    for group in entry_groups(entries):
        for entry in group:
            # The severity in full (WARNING, not WARN), padded to the longest of Cloud Logging's, EMERGENCY:
            # https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry#logseverity
            prefix = f"{entry.timestamp:%m-%d %H:%M:%S} {entry.severity:<9} {entry.node_id or '-'} "
            indent = " " * len(prefix)
            for number, line in enumerate(entry.message.splitlines() or [""]):
                lead = prefix if number == 0 else indent
                shown.append(lead + cut_at_word(line, LINE_CHARS))
                whole.append(lead + line)
    head = section(f"*{plural(len(entries), 'entry', 'entries')}*, newest first")
    footer = window.footer()
    if shown == whole:
        return blocks_reply([head, *_listing(shown), context(footer)])
    footer += f"\nLines over {LINE_CHARS} characters end in …; every line is whole in `{LISTING_FILE}`."
    reply = blocks_reply([head, *_listing(shown), context(footer)])
    whole_text = blocks_reply([head, *_listing(whole), context(footer)]).text
    reply.files.append(
        Attachment(LISTING_FILE, whole_text, "The log entries, every line whole", whole_answer=True)
    )
    return reply


def _listing(lines: list[str]) -> list[Block]:
    """Every line kept, in a code block split into sections; what exceeds one message goes whole into a
    file (the Slack gateway)."""
    return [section(part) for part in split_sections(code("\n".join(lines)))]


def entry_groups(entries: Sequence[LogEntry]) -> list[list[LogEntry]]:
    """`entries` (newest first) as groups newest first, each group in log order (oldest first): a group is
    an entry and the lines of the same traceback written just before it on the same node and log, within
    FOLD_WINDOW_S (`_precedes_in_traceback`: its frames, `ops.diagnosis.families.is_traceback_line`, and
    the message it was logged under), so that a traceback read newest first still reads top to bottom.
    Every other entry is a group of its own.

    Args:
        entries: LogEntry values, newest first (as `ops.gcp.cloudlogs.fetch` yields them).

    Returns:
        Lists of entries, together holding each entry once.
    """
    groups: list[list[LogEntry]] = []
    for entry in entries:
        newer = groups[-1][-1] if groups else None
        if newer is not None and _precedes_in_traceback(entry, newer):
            groups[-1].append(entry)
        else:
            groups.append([entry])
    return [group[::-1] for group in groups]


def _precedes_in_traceback(older: LogEntry, newer: LogEntry) -> bool:
    """Whether `older` was written just before `newer` as a line of the same traceback: a traceback line
    before another or before its exception line, or the message a logger printed the traceback under (the
    line before "Traceback (most recent call last):" with the same logger prefix, as vLLM's
    `logger.exception` writes them)."""
    if (
        older.node_id != newer.node_id
        or older.log_name != newer.log_name
        or not timedelta(0) <= newer.timestamp - older.timestamp <= timedelta(seconds=FOLD_WINDOW_S)
    ):
        return False
    header = newer.message.find(TRACEBACK_HEADER)
    if header > 0 and older.message.startswith(newer.message[:header]):
        return True
    return is_traceback_line(older.message) and (
        is_traceback_line(newer.message) or is_exception_line(newer.message)
    )


def cut_at_word(line: str, limit: int) -> str:
    """`line` when it holds at most `limit` characters, else cut at the last space within `limit` (at
    `limit` itself when the last LINE_WORD_CHARS characters hold none: a path, a hash) and marked " …"."""
    if len(line) <= limit:
        return line
    head = line[:limit]
    space = head.rfind(" ")
    if space >= limit - LINE_WORD_CHARS:
        head = head[:space]
    return head.rstrip() + " …"


def unchecked_line(container: str, error: OpsError) -> str:
    """The one line of an empty read whose container's log driver could not be read over SSH: that it was
    not checked, and why (the error's message, its first line)."""
    why = (str(error.message).splitlines() or ["no answer"])[0]
    return f":grey_question: Not checked whether `{container}` logs to Cloud Logging: {cut_at_word(why, 200)}"


def noted(reply: Reply, line: str) -> Reply:
    """`reply` with `line` (mrkdwn) after its blocks, in a section of its own and in its fallback text;
    `reply` itself when `line` is ""."""
    if not line:
        return reply
    return replace(reply, text=f"{reply.text}\n\n{line}", blocks=[*reply.blocks, section(line)])


@dataclass(frozen=True)
class Errors:
    """What `/logs analyze` found when the window has errors, as gathered by the handler.

    Attributes:
        analysis: the templates and the model's analysis (`llm.logsum.analyze`).
        now: what serves now (`bot.shared.diagnosis.serving_now`).
        ranked: the templates, those that may describe the running container first.
        current: the findings placed on the running container; earlier / other: the rest, by why.
        author: who wrote the analysis (`bot.shared.diagnosis.written_by`), "" when no model answered.
        model_context: that model's context size (`ContextSize.describe`), "" when no model answered.
        rules_only: why the answer is rules only (`bot.shared.diagnosis.rules_only`), shown when no model
        answered.
    """

    analysis: Analysis
    now: ServingNow
    ranked: tuple[TemplateSummary, ...]
    current: Diagnosis
    earlier: Diagnosis
    other: Diagnosis
    author: str = ""
    model_context: str = ""
    rules_only: str = ""


@dataclass(frozen=True)
class LogAnalysis:
    """`/logs analyze`'s result: the window (`span`), the read (`report`), the entries and errors mined,
    Cloud Logging's read quota (reads a minute), and `errors` (None when the window has none)."""

    span: timedelta
    report: ReadReport
    total_entries: int
    error_entries: int
    reads_per_minute: int
    errors: Errors | None


def log_analysis(a: LogAnalysis) -> Reply:
    """The analysis: a header with the window and size, the sampling and any partial read, then the top
    five error kinds, the placed findings, the model's analysis or why it is rules only, and every template
    in an attached TSV."""
    report = a.report
    older_sampled = report.older_errors_fraction < 1.0
    sampled = report.sample_fraction < 1.0 or older_sampled
    size = f"{a.total_entries:,} entries"
    if sampled:
        size = f"~{size} (estimated)"
    blocks: list[Block] = [
        header(f"Log analysis: last {human_duration(a.span).removesuffix(' 00m')}, {size}")
    ]
    if sampled:
        errors = (
            f"The newest {report.error_entries:,} errors read, the older ones sampled at "
            f"{report.older_errors_fraction:.2%}"
            if older_sampled
            else f"Every error read ({report.error_entries:,})"
        )
        rest = (
            f"the rest sampled at {report.sample_fraction:.2%}"
            if report.sample_fraction < 1.0
            else "the rest read"
        )
        blocks.append(
            context(
                f"{errors}; {rest}. Samples by `sample(insertId, ...)`, their counts scaled up. "
                f"{report.reads} reads of Cloud Logging's {a.reads_per_minute} a minute."
            )
        )
    if report.partial:
        blocks.append(
            section(
                ":warning: *Partial:* not read: "
                + "; ".join(report.missing)
                + ". Try a shorter `--since` or `--node`, or again in a minute."
            )
        )
    if a.errors is None and not a.total_entries:
        # A VM that serves logs every request: a window with no entry at all says nothing of its errors.
        blocks.append(
            section(
                ":grey_question: *No entries at all* in the window: nothing of the TPU VM or its vLLM "
                "container reached Cloud Logging, so this says nothing about errors. `/vllm logs` reads the "
                "container over SSH; `/logs --since 1d` shows whether anything arrived earlier."
            )
        )
        return blocks_reply(blocks)
    if a.errors is None:
        blocks.append(section(f":white_check_mark: No errors in the window ({a.total_entries:,} entries)."))
        return blocks_reply(blocks)
    whole = [*blocks, *_errors_blocks(a.errors)]
    fitted, left_out = fit_sections(whole, len(blocks))
    reply = blocks_reply(fitted)
    if left_out:
        text = blocks_reply(whole).text
        reply.files.append(Attachment(ANALYSIS_FILE, text, "The whole log analysis", whole_answer=True))
    table = "\n".join(
        f"{t.count}\t{t.severity}\t{t.first_seen:%F %T}\t{t.last_seen:%F %T}\t{t.template}"
        for t in a.errors.analysis.templates
    )
    reply.files.append(Attachment("log-templates.tsv", table, "All log templates"))
    return reply


def fit_sections(blocks: list[Block], first: int = 0) -> tuple[list[Block], bool]:
    """`blocks` within Slack's limits on a section (SECTION_ROOM) and on a message's block text
    (MESSAGE_ROOM), by fitting the section blocks from index `first` on, never the others: each keeps its
    heading (its first line) and as many whole items (a line and the lines indented under it) as its share
    of the room holds, in as many sections as they need, split between items; an item too large for a
    section keeps its lines while they fit, the last one cut at a word (`cut_at_word`). A section that
    leaves something out says how much and that ANALYSIS_FILE holds it. Shares: the room left by the other
    blocks, split so that no section gets more than it needs and the rest is shared equally.

    Args:
        blocks: Block Kit dicts as `bot.slack.render` builds them.
        first: the index of the first block that may be fitted.

    Returns:
        (the blocks, whether any section left something out).
    """
    fitted = [i for i, b in enumerate(blocks) if i >= first and b.get("type") == "section" and "text" in b]
    fixed = sum(_wire_len(_text_of(b)) for i, b in enumerate(blocks) if i not in fitted)
    needs = [_wire_len(_text_of(blocks[i])) for i in fitted]
    rooms = dict(zip(fitted, _shares(needs, MESSAGE_ROOM - fixed), strict=True))
    out: list[Block] = []
    left_out = False
    for i, block in enumerate(blocks):
        text = _text_of(block)
        if i not in rooms or _wire_len(text) <= min(rooms[i], SECTION_ROOM):
            out.append(block)
            continue
        parts, dropped = _fit_section(text, rooms[i])
        out += [section(part) for part in parts]
        left_out = left_out or dropped
    return out, left_out


def _shares(needs: list[int], room: int) -> list[int]:
    """Each need's share of `room`: the smallest needs first get what they need, the others an equal part of
    what is left."""
    shares = [0] * len(needs)
    left = max(room, 0)
    order = sorted(range(len(needs)), key=needs.__getitem__)
    for done, i in enumerate(order):
        shares[i] = min(needs[i], left // (len(needs) - done))
        left -= shares[i]
    return shares


def _fit_section(text: str, room: int) -> tuple[list[str], bool]:
    """`text` (a heading line, then items) in at most `room` characters as Slack receives them, in sections
    of at most SECTION_ROOM split between items; when something is left out, the last line says so (see
    `fit_sections`). Returns (the sections' texts, whether something was left out)."""
    heading, *lines = text.split("\n")
    items: list[list[str]] = []
    for line in lines:
        if items and line[:1].isspace():
            items[-1].append(line)
        else:
            items.append([line])
    parts = [[heading]]
    used = size = _wire_len(heading)
    reserve = 0 if _wire_len(text) <= room else LEFT_OUT_ROOM
    shown = 0
    whole = True
    for item in items:
        need = sum(_wire_len(line) + 1 for line in item)
        if used + need > room - reserve:
            break
        if size + need > SECTION_ROOM - reserve:
            if need <= SECTION_ROOM - reserve:  # the item starts a section of its own
                parts.append([])
                size = 0
            else:  # larger than any section: its lines while they fit, the last one cut at a word
                item = _cut_item(item, SECTION_ROOM - LEFT_OUT_ROOM - size)
                need = sum(_wire_len(line) + 1 for line in item)
                whole = False
        parts[-1] += item
        used += need
        size += need
        shown += 1
        if not whole:
            break
    if shown == len(items) and whole:
        return ["\n".join(part) for part in parts], False
    missing = len(items) - shown
    more = plural(missing, "more item", "more items") if whole else "the rest"
    parts[-1].append(f"_… {more} not shown here: the whole analysis is in `{ANALYSIS_FILE}`._")
    return ["\n".join(part) for part in parts if part], True


def _cut_item(item: list[str], room: int) -> list[str]:
    """The lines of `item` that fit in `room` characters as Slack receives them, the first that does not cut
    at a word (dropped when too little room is left for a few words)."""
    kept: list[str] = []
    for line in item:
        size = _wire_len(line) + 1
        if size > room:
            if room > LINE_WORD_CHARS:
                kept.append(cut_at_word(line, room - (size - len(line)) - 2))
            break
        kept.append(line)
        room -= size
    return kept


def _text_of(block: Block) -> str:
    text = block.get("text")
    if isinstance(text, dict):
        return str(text.get("text", ""))
    return "".join(str(e.get("text", "")) for e in block.get("elements", []) if isinstance(e, dict))


def _wire_len(text: str) -> int:
    """Characters of `text` as Slack receives it (escaped: `&lt;` for `<`)."""
    return len(to_mrkdwn(text))


def _errors_blocks(e: Errors) -> list[Block]:
    now = e.now
    blocks = [section("*Top error kinds*\n" + "\n".join(_kind_line(t, now) for t in e.ranked[:5]))]
    shown = diagnosis_text(e.current)
    if shown:
        blocks.append(section(shown))
    elif now.started_at is not None:
        blocks.append(
            section(
                f"No error in the window is placed on the running container (up since {utc(now.started_at)});"
                " what follows is earlier or from another process."
            )
        )
    if e.earlier.findings:
        heading = "Earlier failures, before the current container started: not the present state"
        blocks.append(section(diagnosis_text(e.earlier, heading=heading)))
    if e.other.findings:
        heading = "Failures of another process or node: not the serving container"
        blocks.append(section(diagnosis_text(e.other, heading=heading)))
    if now.missing:
        blocks.append(context("Not placed against the serving container: " + "; ".join(now.missing)))
    result = e.analysis
    notes = [f"{result.included_templates} templates in the prompt"] if e.author else []
    if e.author and result.model_analysis:
        blocks.append(section("*Gemma's analysis*\n" + result.model_analysis))
        blocks.append(context(e.author))
        budget = f"prompt {result.prompt_tokens or '-'} of {result.budget_tokens or '-'} budget tokens"
        notes += [budget, e.model_context]
    else:
        blocks.append(section(e.rules_only))
    if result.note and e.author:
        notes.append(result.note)
    if notes:
        blocks.append(context(" · ".join(notes)))
    return blocks


def _kind_line(t: TemplateSummary, now: ServingNow) -> str:
    """One top error kind: count, severity, template, times, its folded traceback lines, and when it does
    not describe the present, why (`ops.diagnosis.engine.template_note`)."""
    template = cut_at_word(t.template, TEMPLATE_CHARS)
    line = f"• *{t.count:,}× {t.severity}* `{template}`\n  {utc(t.first_seen)} → {utc(t.last_seen)}"
    if t.traceback_lines:
        line += f" (+{t.traceback_lines:,} traceback lines)"
    note = template_note(t, now, fatal=is_fatal(t))
    return line + (f"\n  _{note}_" if note else "")
