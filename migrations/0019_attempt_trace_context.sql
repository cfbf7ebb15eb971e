-- Traces (docs/tracing.md): an attempt is a span from its claim to its close, and the claim
-- and the close are different requests, often of different processes. The claim records the
-- W3C traceparent of the call that claimed (its trace and span), and whichever process
-- closes the attempt emits the attempt's span in that trace, as a child of that call. Null
-- when tracing is off, or the claim came from no traced call.
ALTER TABLE attempts ADD COLUMN claim_traceparent text
  CONSTRAINT attempts_claim_traceparent_w3c CHECK (claim_traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
