package server

import (
	"github.com/datajobs/datajobs/internal/jobidentity"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/store"
)

// newJobIdentity is the verifier of job pods' tokens (internal/jobidentity): it watches the
// job pods of this installation in cfg.Namespace, in every replica.
func newJobIdentity(cfg Config, cluster *kube.Cluster, db *store.Store) (*jobidentity.Verifier, error) {
	return jobidentity.New(jobidentity.Config{
		Client: cluster.Client, Namespace: cfg.Namespace, ServiceAccount: cfg.JobServiceAccount, ServiceAccountTemplate: cfg.JobServiceAccountTemplate,
		Installation: db.InstallationID, Logger: cfg.Logger,
	})
}
