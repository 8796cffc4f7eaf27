package ziparchive

import (
	"bytes"
	"encoding/binary"
)

// Record layouts of the zip format (APPNOTE.TXT 4.3), as archive/zip reads them.
const (
	dirEndLen         = 22 // end of central directory record, without its comment
	dir64LocLen       = 20 // zip64 end of central directory locator
	dir64EndLen       = 56 // zip64 end of central directory record
	dirHeaderLen      = 46 // central directory file header, without its variable fields
	dirEndSig         = "PK\x05\x06"
	dir64LocSig       = "PK\x06\x07"
	dir64EndSig       = "PK\x06\x06"
	dirHeaderSig      = "PK\x01\x02"
	maxDirEndDistance = 65 * 1024 // archive/zip looks for the end record this far from the end
)

// zipEntries counts the entries of the central directory of archive the way archive/zip
// will read them, without allocating: it finds the end-of-central-directory record (zip64
// too), checks the count it declares, then walks the headers from where that record says
// the directory starts, as archive/zip does, and stops after limit+1. It returns
// min(count, limit+1), or the declared count when that is larger: archive/zip trusts only
// the low 16 bits of the declared count and reads headers until one is not, so neither the
// declared count nor the directory size alone bounds what it allocates, one File per
// header. ok is false when archive has no end record: archive/zip refuses it too.
func zipEntries(archive []byte, limit int) (n uint64, ok bool) {
	end, base, ok := zipDirectoryEnd(archive)
	if !ok {
		return 0, false
	}
	if end.records > uint64(limit) {
		return end.records, true
	}
	for off := base + int64(end.offset); n <= uint64(limit); n++ {
		next, ok := dirHeaderAt(archive, off)
		if !ok {
			break
		}
		off = next
	}
	return n, true
}

// dirHeaderAt returns the offset just past the central directory header at off, and
// whether there is a whole one there (archive/zip's readDirectoryHeader stops the
// directory at the first that is not).
func dirHeaderAt(b []byte, off int64) (int64, bool) {
	if off < 0 || off > int64(len(b))-dirHeaderLen || string(b[off:off+4]) != dirHeaderSig {
		return 0, false
	}
	h := b[off:]
	vars := int64(binary.LittleEndian.Uint16(h[28:])) + int64(binary.LittleEndian.Uint16(h[30:])) + int64(binary.LittleEndian.Uint16(h[32:]))
	next := off + dirHeaderLen + vars
	return next, next <= int64(len(b))
}

// dirEnd is what the end records say of the central directory.
type dirEnd struct {
	records, size, offset uint64
}

// zipDirectoryEnd reads the end records as archive/zip's readDirectoryEnd does, and
// returns them with the base offset of the archive (non-zero when data precedes it).
func zipDirectoryEnd(b []byte) (dirEnd, int64, bool) {
	var d dirEnd
	// The last end signature whose comment fits, within the last 1 KiB, then 65 KiB.
	p := -1
	for _, window := range []int{1024, maxDirEndDistance} {
		start := max(len(b)-window, 0)
		p = lastDirEnd(b[start:])
		if p >= 0 {
			p += start
			break
		}
		if start == 0 {
			break
		}
	}
	if p < 0 {
		return d, 0, false
	}
	r := b[p+4:]
	d.records = uint64(binary.LittleEndian.Uint16(r[6:]))
	d.size = uint64(binary.LittleEndian.Uint32(r[8:]))
	d.offset = uint64(binary.LittleEndian.Uint32(r[12:]))
	endOffset := int64(p)
	if d.records == 0xffff || d.size == 0xffff || d.offset == 0xffffffff {
		if loc := endOffset - dir64LocLen; loc >= 0 && string(b[loc:loc+4]) == dir64LocSig &&
			binary.LittleEndian.Uint32(b[loc+4:]) == 0 && binary.LittleEndian.Uint32(b[loc+16:]) == 1 {
			at := binary.LittleEndian.Uint64(b[loc+8:])
			if len(b) < dir64EndLen || at > uint64(len(b)-dir64EndLen) || string(b[at:at+4]) != dir64EndSig {
				return d, 0, false
			}
			r := b[at+24:]
			d.records = binary.LittleEndian.Uint64(r[8:])
			d.size = binary.LittleEndian.Uint64(r[16:])
			d.offset = binary.LittleEndian.Uint64(r[24:])
			endOffset = int64(at)
		}
	}
	if d.size > 1<<63-1 || d.offset > 1<<63-1 {
		return d, 0, false
	}
	base := endOffset - int64(d.size) - int64(d.offset)
	if o := base + int64(d.offset); o < 0 || o >= int64(len(b)) {
		return d, 0, false
	}
	// archive/zip prefers a base of 0 when a directory header is found there.
	if _, ok := dirHeaderAt(b, int64(d.offset)); base > 0 && ok {
		base = 0
	}
	return d, base, true
}

// lastDirEnd is the index in block of the last end signature whose comment is not cut
// off, -1 when there is none (archive/zip's findSignatureInBlock).
func lastDirEnd(block []byte) int {
	for i := len(block) - dirEndLen; i >= 0; i-- {
		if block[i] == 'P' && bytes.HasPrefix(block[i:], []byte(dirEndSig)) {
			n := int(binary.LittleEndian.Uint16(block[i+dirEndLen-2:]))
			if n+dirEndLen+i > len(block) {
				return -1
			}
			return i
		}
	}
	return -1
}
