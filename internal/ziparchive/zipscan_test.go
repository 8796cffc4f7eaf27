package ziparchive

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// manyEntries is a zip archive of n central directory entries that all point at one
// empty local file: about 47 bytes an entry, so a million fit in a 50 MiB upload.
// declared is the count its end record gives; zip64 says whether it has zip64 end records.
func manyEntries(n int, declared uint64, zip64 bool) []byte {
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	// Local file header of "a", stored, empty.
	b.WriteString("PK\x03\x04")
	le([]uint16{20, 0, 0, 0, 0})
	le([]uint32{0, 0, 0})
	le([]uint16{1, 0})
	b.WriteString("a")
	dirOffset := b.Len()
	header := make([]byte, 0, 47)
	header = append(header, "PK\x01\x02"...)
	header = binary.LittleEndian.AppendUint16(header, 20) // made by
	header = binary.LittleEndian.AppendUint16(header, 20) // needed
	header = append(header, make([]byte, 2+2+2+2+4+4+4)...)
	header = binary.LittleEndian.AppendUint16(header, 1) // name length
	header = append(header, make([]byte, 2+2+2+2+4+4)...)
	header = append(header, 'a')
	b.Grow(n * len(header))
	for range n {
		b.Write(header)
	}
	dirSize := b.Len() - dirOffset
	records16 := uint16(declared)
	if zip64 {
		end64 := b.Len()
		b.WriteString("PK\x06\x06")
		le(uint64(dir64EndLen - 12))
		le([]uint16{45, 45})
		le([]uint32{0, 0})
		le([]uint64{declared, declared, uint64(dirSize), uint64(dirOffset)})
		b.WriteString("PK\x06\x07")
		le(uint32(0))
		le(uint64(end64))
		le(uint32(1))
		records16 = 0xffff
	}
	b.WriteString("PK\x05\x06")
	le([]uint16{0, 0, records16, records16})
	le([]uint32{uint32(dirSize), uint32(dirOffset)})
	le(uint16(0))
	return b.Bytes()
}

// uploadLimits are the API's default limits of an upload (service.SourcesConfig).
var uploadLimits = Limits{MaxArchiveBytes: 50 << 20, MaxUncompressedBytes: 200 << 20, MaxFiles: 10_000}

func TestAMillionEntriesAreRefusedWithoutAllocatingThem(t *testing.T) {
	cfg := uploadLimits
	tests := []struct {
		name    string
		archive []byte
	}{
		{"a zip64 archive that declares its million entries", manyEntries(1_000_000, 1_000_000, true)},
		// archive/zip checks only the low 16 bits of the count and reads headers until
		// one is not: 15×65536+5 entries declared as 5.
		{"an archive that declares 5 of its 983,045 entries", manyEntries(15*65536+5, 5, false)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Less(t, int64(len(tt.archive)), cfg.MaxArchiveBytes, "it fits in an upload")
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := Read(tt.archive, cfg)
			runtime.ReadMemStats(&after)
			var ze *Error
			require.ErrorAs(t, err, &ze)
			require.False(t, ze.TooLarge, "a 400, not a 413")
			require.Contains(t, err.Error(), "too many entries")
			// archive/zip would allocate a File (about 200 bytes) per entry: 200 MB.
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated to refuse it")
			require.Less(t, after.Mallocs-before.Mallocs, uint64(1000), "allocations made to refuse it")
		})
	}
}

func TestZipEntriesCountsWhatArchiveZipReads(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 3, 70_000} {
		archive := manyEntries(n, uint64(n), n > 0xffff)
		zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
		require.NoError(t, err)
		got, ok := zipEntries(archive, 1<<20)
		require.True(t, ok)
		require.Equal(t, uint64(len(zr.File)), got, "%d entries", n)
		// Over the limit, the count is above it too.
		got, _ = zipEntries(archive, 2)
		require.Equal(t, n > 2, got > 2, "%d entries counted as %d", n, got)
	}
	// Data before the archive (a self-extracting zip) moves every offset.
	archive := append([]byte("#!/bin/sh\nexit 0\n"), manyEntries(3, 3, false)...)
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	require.NoError(t, err)
	got, ok := zipEntries(archive, 100)
	require.True(t, ok)
	require.Equal(t, uint64(len(zr.File)), got)
}

// FuzzZipEntries checks the count against archive/zip on arbitrary bytes: whenever
// archive/zip reads a directory, the count is at least its number of entries, so a count
// within the limit means archive/zip allocates no more than the limit.
func FuzzZipEntries(f *testing.F) {
	f.Add(manyEntries(3, 3, false))
	f.Add(manyEntries(2, 2, true))
	f.Add(append([]byte("prefix"), manyEntries(1, 1, false)...))
	f.Add([]byte("PK\x05\x06" + string(make([]byte, 18))))
	f.Fuzz(func(t *testing.T, archive []byte) {
		got, ok := zipEntries(archive, 1<<20)
		zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
		if err != nil && err != zip.ErrInsecurePath { //nolint:errorlint // archive/zip returns it as it is
			return
		}
		require.True(t, ok, "archive/zip found a directory end")
		require.GreaterOrEqual(t, got, uint64(len(zr.File)))
	})
}

// BenchmarkRefuseAMillionEntries measures what refusing the million-entry archive costs
// (allocations and bytes per op; see docs/benchmarks.md).
func BenchmarkRefuseAMillionEntries(b *testing.B) {
	archive := manyEntries(1_000_000, 1_000_000, true)
	cfg := uploadLimits
	b.ReportAllocs()
	b.SetBytes(int64(len(archive)))
	for b.Loop() {
		if _, err := Read(archive, cfg); err == nil {
			b.Fatal("accepted")
		}
	}
}
