package job

import (
	"errors"
	"io"
	"time"
)

// Sources is one stored version of a job's sources: a zip archive and who uploaded it.
type Sources struct {
	// Version is the content address of the archive's files (see service.SourcesVersion).
	Version string
	// Archive is the zip archive as it was first uploaded with this content.
	Archive []byte
	// Reason is the reason given with the latest upload of this content.
	Reason string
	// UploadedBy and UploadedAt describe the latest upload of this content.
	UploadedBy string
	UploadedAt time.Time
	// ConfigPolicy is the run policy its config.ini sets (ConfigPolicy); a deploy of the
	// version applies it.
	ConfigPolicy PolicyChange
}

// ErrNoSources is returned by GetSources when the job exists but has no sources, or not
// the version asked for. The service turns it into a 404 that names what is missing.
var ErrNoSources = errors.New("no such sources")

// SourcesReader is one stored version of a job's sources, read from the database as it is
// copied (io.Copy uses its WriteTo, a chunk at a time), so a download holds a chunk, not
// the archive.
type SourcesReader struct {
	// Sources describe the version (Archive is nil).
	Sources
	// Size is the archive's size in bytes.
	Size int64
	// ArchiveReader reads the archive.
	ArchiveReader
}

// ArchiveReader reads a stored archive as it is copied.
type ArchiveReader interface {
	io.Reader
	io.WriterTo
}
