"""The diagnosis engine: everything the project knows about failures and how it reads them. It owns the
fault catalogue (`faults.yaml`, loaded and validated by `families`, its other upstream texts by `wordings`),
the typed signals, matching and the one ranker (`engine`: signals in, findings out, and where a log's
findings stand against what serves now, `engine.place`), the evidence lines (`families.key_lines`,
`families.shorten`), the fixes filled with the live facts of the deployment concerned (`families.FixFacts`),
the state of a queued resource, a Slack refusal and a maintenance event as findings (`notices`), a create
error's meaning for the zone and the capacity search (`zonefit`) and the summary of a failure no family
explains (`nomatch`). Every surface
asks `engine.diagnose` and renders what it returns. It may import the rest of `ops` and pure code only:
never `bot` (Slack) nor `llm` (the model), so the same signals give the same findings wherever they are
read.
"""
