-- When the leader saw the Kubernetes Job of a manual start created. A submitted execution
-- whose Job had been created and is gone (deleted by hand before its pod ran) is lost, not
-- started again; one never created is created by the next leader.
ALTER TABLE data_job_execution ADD COLUMN job_created_at timestamptz;
