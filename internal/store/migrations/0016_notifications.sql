-- Notifications (issue 25): an outbox. An event is inserted by the very statement that
-- records the state change causing it (a deployment's outcome, an execution's final
-- status), so a replica that dies loses no event and a statement that rolls back invents
-- none. key makes a cause one event whatever writes it again (a resync, a failover, a
-- retry that ends the same way). recipients are the job's contacts when it happened.
CREATE TABLE notification_event (
    id          bigserial PRIMARY KEY,
    key         text NOT NULL UNIQUE,
    kind        text NOT NULL,
    job_name    text NOT NULL,
    team        text NOT NULL,
    recipients  text[] NOT NULL DEFAULT '{}',
    payload     jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- expanded_at is when the dispatcher wrote the event's deliveries (NULL: not yet).
    expanded_at timestamptz
);
CREATE INDEX notification_event_unexpanded ON notification_event (id) WHERE expanded_at IS NULL;
CREATE INDEX notification_event_job ON notification_event (team, job_name, id DESC);

-- One delivery per event, channel and recipient (an address, a webhook). message_id is
-- the message that carried it: its own, or a digest's that carried several.
CREATE TABLE notification_delivery (
    event_id        bigint NOT NULL REFERENCES notification_event (id) ON DELETE CASCADE,
    channel         text NOT NULL,
    recipient       text NOT NULL,
    state           text NOT NULL DEFAULT 'pending',
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text NOT NULL DEFAULT '',
    message_id      text NOT NULL DEFAULT '',
    delivered_at    timestamptz,
    PRIMARY KEY (event_id, channel, recipient)
);
CREATE INDEX notification_delivery_due ON notification_delivery (next_attempt_at) WHERE state = 'pending';
CREATE INDEX notification_delivery_sent ON notification_delivery (channel, recipient, delivered_at) WHERE delivered_at IS NOT NULL;
