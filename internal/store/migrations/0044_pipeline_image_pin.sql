-- A pipeline run is pinned to the images its jobs were deployed with when it started
-- (issue 40): a repair runs the same code even if a job was deployed again since.
-- The applied deployment records the image of the CronJob's main container as written
-- (by digest when the synchronizer built it); a run's node records it at the run's start
-- and every attempt of the node keeps it; an execution a node starts carries it, and the
-- leader creates its Job with that image instead of the CronJob's. '' means none
-- recorded (a row from before this migration, a deployment not applied yet): the
-- CronJob's image, as any manual start.
ALTER TABLE actual_data_job_deployment ADD COLUMN image text NOT NULL DEFAULT '';
ALTER TABLE pipeline_node_run ADD COLUMN image text NOT NULL DEFAULT '';
ALTER TABLE data_job_execution ADD COLUMN image text NOT NULL DEFAULT '';
