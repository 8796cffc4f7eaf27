-- An execution target whose shard cannot run (issue 44): its cluster unreachable, its
-- apiserver not answering. The replica that fails to run the shard writes the row when
-- that changes (internal/server/shards.go); every replica's console reads it for its
-- banner (docs/targets.md, "An unreachable target").
CREATE TABLE execution_target_health (
    target            text PRIMARY KEY REFERENCES execution_target (name) ON DELETE CASCADE,
    unreachable_since timestamptz NOT NULL,
    reason            text NOT NULL,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    -- The banner shows the outage until then: a replica that reports it again pushes it
    -- on, one that runs the shard again brings it close, and one that died lets it lapse.
    shown_until       timestamptz NOT NULL
);
