-- Teams' notification webhooks (issue 25, docs/webhooks.md). The secret is
-- the webhook's HMAC key, so it must be recoverable: it is kept as an envelope of the
-- secrets key ring (secret_key_id names the key, secret_wrapped_key the wrapped data key,
-- secret_sealed the sealed secret) and, while no key ring is configured, as it is
-- (secret_key_id '', no wrapped key, secret_sealed the key itself).
CREATE TABLE team_webhook (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    team               text NOT NULL,
    name               text NOT NULL,
    url                text NOT NULL,
    format             text NOT NULL,
    events             text[] NOT NULL,
    secret_key_id      text NOT NULL DEFAULT '',
    secret_wrapped_key bytea,
    secret_sealed      bytea NOT NULL,
    created_by         text NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_by         text NOT NULL,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team, name)
);
