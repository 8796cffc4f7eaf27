-- The web console's sessions, server-side (issue 22): the browser holds only a random id,
-- of which this table keeps the SHA-256. Sign-out deletes the row, so the cookie is dead at
-- once on every replica (a copied cookie too); a new sign-in of a user writes the teams the
-- identity provider now asserts to every session of that user, so a team change applies at
-- once; and an operator can end a user's sessions with one DELETE.
CREATE TABLE console_session (
    id_hash    bytea PRIMARY KEY,
    username   text NOT NULL,
    teams      text[] NOT NULL DEFAULT '{}',
    admin      boolean NOT NULL DEFAULT false,
    verified   boolean NOT NULL DEFAULT false,
    csrf       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX console_session_username ON console_session (username);
CREATE INDEX console_session_expires_at ON console_session (expires_at);
