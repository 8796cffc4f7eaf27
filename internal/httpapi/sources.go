package httpapi

import (
	"io"
	"net/http"
	"strconv"
)

// sourcesTypes are the bodies of a sources upload: the VDK client sends the zip as
// application/octet-stream.
var sourcesTypes = []string{"application/octet-stream", "application/zip", "application/x-zip-compressed"}

// versionResponse is VDK's DataJobVersion, the answer to a sources upload.
type versionResponse struct {
	VersionSHA string `json:"version_sha"`
}

func toVersionResponse(version string) versionResponse { return versionResponse{VersionSHA: version} }

// uploadSources is POST .../jobs/{job}/sources: the body is a zip archive of the job's
// directory (read by readArchive), ?reason= says why. 200 with the version, the
// job_version to deploy.
func (a *api) uploadSources(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	body, err := a.readArchive(w, r)
	if err != nil {
		return err
	}
	version, err := a.svc.UploadSources(r.Context(), team, name, body, r.URL.Query().Get("reason"), a.user(r, ""))
	return reply(w, http.StatusOK, version, err, toVersionResponse)
}

// stageSources is POST /data-jobs/for-team/{team}/sources: the body is a zip archive of a
// job's directory, staged for an apply of the team's file (docs/gitops.md), ?reason= says
// why. 201 with the version, the job_version the file deploys; no job is needed and none
// changes. The body limit and the checks are an upload's.
func (a *api) stageSources(w http.ResponseWriter, r *http.Request) error {
	body, err := a.readArchive(w, r)
	if err != nil {
		return err
	}
	version, err := a.svc.StageSources(r.Context(), r.PathValue("team"), body, r.URL.Query().Get("reason"), a.user(r, ""))
	return reply(w, http.StatusCreated, version, err, toVersionResponse)
}

// readArchive reads the zip archive of a sources upload or staging: within the transfer
// timeout, at the minimum rate, and at most the sources' own limit
// (service.SourcesConfig.MaxArchiveBytes), not the 1 MiB of JSON bodies.
func (a *api) readArchive(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	deadlines(w, a.cfg.TransferTimeout)
	r.Body = a.newPace(w).reader(r.Body)
	return readBody(w, r, a.svc.Config().Sources.MaxArchiveBytes)
}

// downloadSources is GET .../jobs/{job}/sources[?version_sha=]: the zip archive of the
// latest sources, or of the version asked for, streamed from the database. The ETag is
// the version.
func (a *api) downloadSources(w http.ResponseWriter, r *http.Request) error {
	deadlines(w, a.cfg.TransferTimeout)
	team, name := jobOf(r)
	src, err := a.svc.DownloadSources(r.Context(), team, name, r.URL.Query().Get("version_sha"))
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", `attachment; filename="`+name+`.zip"`)
	h.Set("Content-Length", strconv.FormatInt(src.Size, 10))
	h.Set("ETag", `"`+src.Version+`"`)
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(a.newPace(w).writer(w), src); err != nil && r.Context().Err() == nil {
		// The status is sent: the client sees a body shorter than its Content-Length.
		a.logger.WarnContext(r.Context(), "sources_download_failed", "op_id", opID(r.Context()), "job", name, "error", err)
	}
	return nil
}

// deleteSources is DELETE .../jobs/{job}/sources: every version goes; 200. ?reason= is
// accepted and ignored, as there is no history to record it in.
func (a *api) deleteSources(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	return replyStatus(w, http.StatusOK, a.svc.DeleteSources(r.Context(), team, name))
}
