-- Bounce suppression and outbox retention (issue 25, docs/notifications.md).
--
-- A recipient whose server refused it permanently (an SMTP 5xx to RCPT TO) is recorded
-- here, and the dispatcher sends it nothing more until `until` (NULL: until an operator
-- removes the row): each delivery to it meanwhile ends `suppressed`, never attempted.
-- event_id is the event whose delivery bounced; no foreign key, so that the outbox's
-- retention can delete the event and keep the suppression.
CREATE TABLE notification_suppression (
    channel    text NOT NULL,
    recipient  text NOT NULL,
    reason     text NOT NULL,
    event_id   bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    until      timestamptz,
    PRIMARY KEY (channel, recipient)
);

-- The retention deletes the oldest finished events first, in bounded batches.
CREATE INDEX notification_event_created ON notification_event (created_at);
