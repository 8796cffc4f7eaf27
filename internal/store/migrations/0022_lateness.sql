-- Lateness (issue 25, VDK's JobDelay): the open lateness episodes the leader has told a
-- job's contacts about, so that each is told once and its end ("recovered") once. A row is
-- inserted by the statement that writes its job_late event, and goes (or is marked
-- recovered) by the statement that writes its job_recovered event.
CREATE TABLE data_job_lateness (
    -- The job_late event's key (notification_event.key).
    key          text PRIMARY KEY,
    -- 'start': no scheduled run started since the schedule time anchor; 'run': the
    -- execution execution_id is still running since anchor.
    kind         text NOT NULL CHECK (kind IN ('start', 'run')),
    job_uid      uuid NOT NULL,
    job_name     text NOT NULL,
    team         text NOT NULL,
    anchor       timestamptz NOT NULL,
    -- 'run': the late execution. 'start': once recovered, the run that started.
    execution_id text,
    -- 'start': when the run that ended the episode was seen started. The row stays while
    -- that run goes on, so its own "still running" lateness counts from then, not from
    -- its Job's creation long before.
    recovered_at timestamptz
);
CREATE INDEX data_job_lateness_job ON data_job_lateness (job_uid) WHERE recovered_at IS NULL;
CREATE INDEX data_job_lateness_execution ON data_job_lateness (execution_id) WHERE execution_id IS NOT NULL;
