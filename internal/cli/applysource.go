package cli

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/datajobs/datajobs/internal/gitops"
	"github.com/datajobs/datajobs/internal/service"
)

// A deployment's source folder (issue 46; docs/gitops.md): `apply` packs it as vdk deploy
// does, stages it for the team (no job needed, none changed) and sends the file with the
// version the staging answered; the apply's transaction makes the staged sources the
// job's. The service never reads a local path, so this is the CLI's work, before the file
// is sent.

// sourced is a job of the file whose deployment names a source folder, packed.
type sourced struct {
	job     string
	archive []byte
	// version is the archive's version, as the service computes it (service.SourcesVersion).
	version string
}

// resolveSources packs the source folders of the file data (read from path, which the
// folders are relative to) and returns the file with each folder's version beside it,
// as YAML (data itself when it names no folder), and the jobs it packed.
func resolveSources(data []byte, path string) ([]byte, []sourced, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return data, nil, nil // not YAML: the service names what is wrong with the file
	}
	var doc map[string]any
	if json.Unmarshal(js, &doc) != nil {
		return data, nil, nil
	}
	jobs, _ := doc["jobs"].([]any)
	var out []sourced
	for _, j := range jobs {
		spec, _ := j.(map[string]any)
		dep, _ := spec["deployment"].(map[string]any)
		folder, _ := dep["source"].(string)
		name, _ := spec["job_name"].(string)
		if folder == "" || name == "" {
			continue
		}
		if !filepath.IsAbs(folder) {
			folder = filepath.Join(filepath.Dir(path), folder)
		}
		archive, err := packFolder(folder, name)
		if err != nil {
			return nil, nil, fmt.Errorf("job %s: pack its source %s: %w", name, folder, err)
		}
		version, err := service.SourcesVersion(archive, service.SourcesConfig{})
		if err != nil {
			return nil, nil, fmt.Errorf("job %s: its source %s: %w", name, folder, err)
		}
		dep["job_version"] = version // beside its source: the apply refuses it if no longer staged
		out = append(out, sourced{job: name, archive: archive, version: version})
	}
	if len(out) == 0 {
		return data, nil, nil
	}
	// YAML again, not JSON: the service reads a trigger's bare on: (YAML 1.1's true) in a
	// YAML file only.
	resolved, err := yaml.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the file: %w", err)
	}
	return resolved, out, nil
}

// skippedDirs are not packed: a version control's metadata and Python's caches are not
// the job's sources.
var skippedDirs = map[string]bool{".git": true, ".hg": true, ".svn": true, "__pycache__": true}

// packFolder zips the files of folder as vdk deploy does: under one top folder named for
// the job, regular files and directories only, in a stable order.
func packFolder(folder, job string) ([]byte, error) {
	info, err := os.Stat(folder)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, errors.New("not a folder")
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	err = filepath.WalkDir(folder, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(folder, p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir() && skippedDirs[d.Name()]:
			return filepath.SkipDir
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file (a link?): copy what it points to into the folder", rel)
		}
		return addFile(zw, p, job+"/"+filepath.ToSlash(rel))
	})
	if err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("close the archive: %w", err)
	}
	return buf.Bytes(), nil
}

// addFile adds the file at path to zw as name, with its mode (an executable stays one).
func addFile(zw *zip.Writer, path, name string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	h, err := zip.FileInfoHeader(info)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	h.Name, h.Method = name, zip.Deflate
	w, err := zw.CreateHeader(h)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("pack %s: %w", name, err)
	}
	return nil
}

// stageSources readies the service for the file (resolved) whose jobs name their source
// folders: a dry run plans the file first (an invalid object, a conflict or a team no
// longer at base, when given, stops it before anything is sent), then the sources of the
// jobs the plan creates or updates are staged for the team (POST
// /data-jobs/for-team/{team}/sources, reason `datajobs apply <src>`). Staging creates and
// changes no job: an apply that then fails leaves only staged sources, which expire. A job
// the plan leaves unchanged deploys a version it has already.
func stageSources(ctx context.Context, c *apiClient, team, src, base string, resolved []byte, jobs []sourced) error {
	out, err := c.do(ctx, http.MethodPost, "/data-jobs/for-team/"+url.PathEscape(team)+"/apply?dry_run=true", resolved,
		"Content-Type", "application/yaml", "X-Datajobs-Source", src)
	if err != nil {
		return err
	}
	var plan gitops.Plan
	if err := json.Unmarshal(out, &plan); err != nil {
		return fmt.Errorf("read the plan: %w", err)
	}
	if ch, ok := plan.Conflict(); ok {
		return fmt.Errorf("the %s %s is managed by the file of %s: nothing was staged", ch.Kind, ch.Name, ch.ManagedBy)
	}
	if base != "" && base != plan.BaseRevision {
		return fmt.Errorf("the team moved since the plan: it is at %s, not %s; plan again", plan.BaseRevision, base)
	}
	writes := map[string]bool{}
	for _, ch := range plan.Changes {
		if ch.Kind == gitops.KindJob {
			writes[ch.Name] = ch.Action == gitops.ActionCreate || ch.Action == gitops.ActionUpdate
		}
	}
	path := "/data-jobs/for-team/" + url.PathEscape(team) + "/sources?reason=" + url.QueryEscape(strings.TrimSpace("datajobs apply "+src))
	for _, j := range jobs {
		if !writes[j.job] {
			continue
		}
		out, err := c.do(ctx, http.MethodPost, path, j.archive, "Content-Type", "application/octet-stream")
		if err != nil {
			return fmt.Errorf("stage the sources of %s: %w", j.job, err)
		}
		var v struct {
			VersionSHA string `json:"version_sha"`
		}
		if err := json.Unmarshal(out, &v); err != nil || v.VersionSHA != j.version {
			return fmt.Errorf("stage the sources of %s: the service answered version %q, not %s (%s)", j.job, v.VersionSHA, j.version, out)
		}
	}
	return nil
}
