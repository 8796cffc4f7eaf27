package ui

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
)

type fileRow struct {
	Path, Size, Href string
	Exec, Current    bool
}

type fileView struct {
	Path, Size string
	Text, Cut  bool
	Content    string
	Limit      string
}

type sourcesData struct {
	Team, Name, JobHref string
	// Version is the version shown: the deployment's, or the latest upload's when the job
	// is not deployed (Deployed false).
	Version    string
	Deployed   bool
	UploadedBy string
	UploadedAt *when
	Reason     string
	Files      []fileRow
	File       *fileView
	// Missing says why there is nothing to show (no sources stored for the version).
	Missing string
}

// sourcesPage is the files of the deployed version of a job's sources, read-only, from the
// stored archive; ?file= shows one of them. Every path shown comes from the archive as the
// upload parsed it (ziparchive); the one asked for is only compared with them.
func (c *Console) sourcesPage(w http.ResponseWriter, r *http.Request, s session) error {
	team, name := r.PathValue("team"), r.PathValue("job")
	ctx := r.Context()
	if _, err := c.svc.GetJob(ctx, team, name); err != nil {
		return err
	}
	d := sourcesData{Team: team, Name: name, JobHref: jobURL(team, name)}
	v, err := c.svc.GetDeployment(ctx, team, name)
	switch {
	case err == nil && v.Status != job.StatusDeleting:
		d.Version, d.Deployed = v.Deployment.JobVersion, true
	case err != nil && job.KindOf(err) != job.KindNotFound:
		return err
	}
	tree, err := c.svc.SourceFiles(ctx, team, name, d.Version)
	if job.KindOf(err) == job.KindNotFound {
		d.Missing = missingSources(d.Version)
		c.renderPage(w, r, http.StatusOK, "sources", page{Title: name + " · files", Session: s, Nav: "jobs", Body: d})
		return nil
	}
	if err != nil {
		return err
	}
	d.Version, d.UploadedBy, d.UploadedAt, d.Reason = tree.Version, tree.UploadedBy, c.when(&tree.UploadedAt), tree.Reason
	want := r.URL.Query().Get("file")
	href := d.JobHref + "/sources?file="
	for _, f := range tree.Files {
		d.Files = append(d.Files, fileRow{Path: f.Path, Size: byteSize(f.Size), Href: href + url.QueryEscape(f.Path), Exec: f.Exec, Current: f.Path == want})
	}
	if want != "" {
		f, err := c.svc.SourceFileOf(ctx, team, name, tree.Version, want)
		if err != nil {
			return err
		}
		d.File = viewOf(f)
	}
	c.renderPage(w, r, http.StatusOK, "sources", page{Title: name + " · files", Session: s, Nav: "jobs", Body: d})
	return nil
}

func viewOf(f service.SourceFileContent) *fileView {
	return &fileView{
		Path: f.Path, Size: byteSize(f.Size), Text: f.Text, Cut: f.Cut, Content: string(f.Content),
		Limit: byteSize(service.MaxSourceFileShown),
	}
}

func missingSources(version string) string {
	if version == "" {
		return "This job has no stored sources: none were uploaded (vdk deploy uploads them), or they were deleted."
	}
	return fmt.Sprintf("No sources are stored for the deployed version %s: it was deployed from an image without an upload, or its sources were deleted.", version)
}

// byteSize is a size in bytes as people read it: "812 B", "12.3 KiB", "4.0 MiB".
func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}
