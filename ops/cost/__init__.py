"""What TPUs cost: the price table (`prices.yaml`, USD per chip-hour, each row with its public source) and
estimates (`pricing`), spend before a request is sent (`spend`) and idle stops (`idle`). It may import
`ops.tpu` (accelerator types, queued resources) and the pure helpers of `ops`; never `bot` or `llm`.
"""
