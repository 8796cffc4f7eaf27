package service

import (
	"errors"
	"fmt"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/ziparchive"
)

// configPolicy reads the run policy keys of the job's config.ini in archive (job.ConfigPolicy)
// and checks them as a deployment's fields are checked, so that an upload names a wrong key
// at once. config.ini is at the archive's root, or under its one top folder, as vdk deploy
// zips a job's directory; an archive without one sets no policy.
func (s *Service) configPolicy(archive []byte) (job.PolicyChange, error) {
	limits := s.cfg.Sources.withDefaults()
	files, err := ziparchive.Read(archive, ziparchive.Limits{
		MaxArchiveBytes: limits.MaxArchiveBytes, MaxUncompressedBytes: limits.MaxUncompressedBytes, MaxFiles: limits.MaxFiles,
	})
	if err != nil {
		return job.PolicyChange{}, archiveError(err, limits)
	}
	f, ok := configINI(files)
	if !ok {
		return job.PolicyChange{}, nil
	}
	rc, err := f.Open()
	if err != nil {
		return job.PolicyChange{}, badArchive("The archive is not valid", fmt.Sprintf("%q cannot be read: %v", f.Name, err))
	}
	defer rc.Close()
	c, err := job.ConfigPolicy(rc)
	if err == nil {
		err = c.ApplyTo(job.RunPolicy{}).Validate(s.cfg.MaxExecutionTimeout)
	}
	var je *job.Error
	if errors.As(err, &je) {
		je.What = "The job's config.ini: " + je.What
		je.Consequences = "The sources were not uploaded and nothing was changed."
		je.Countermeasures = "Correct the [job] section of config.ini (docs/api.md, \"Run policy in config.ini\") and deploy again."
	}
	return c, err
}

// configINI finds the job's config.ini: at the root, or under the archive's one top folder.
func configINI(files []ziparchive.File) (ziparchive.File, bool) {
	name := ziparchive.TopFolder(files) + "config.ini"
	for _, f := range files {
		if f.Path == name {
			return f, true
		}
	}
	return ziparchive.File{}, false
}
