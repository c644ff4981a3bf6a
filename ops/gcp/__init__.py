"""Google Cloud around the TPUs: where every client is built and its errors mapped (`google`), Cloud Logging
read by one reader (`cloudlogs`: every `entries.list` request, paced within the read quota) and the
planned read of a large window on top of it (`logplan`), Secret Manager, the Cloud Quotas API, and the IAM
permission of every method the bot calls. It may import the pure helpers of `ops` (errors, times, zones
through `ops.tpu.model`) and `ops.diagnosis`; never `bot` or `llm`.
"""
