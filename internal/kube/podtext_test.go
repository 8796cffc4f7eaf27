package kube_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/kube"
)

// Issue 41, L1: what a pod prints or leaves as its termination message is kept as valid
// UTF-8 without NUL (PostgreSQL's text refuses both), cut at a character boundary.
func TestPodTextIsValidUTF8WithoutNULAndCutAtACharacter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in string
		n        int
		cut      kube.Cut
		want     string
	}{
		{"a NUL becomes U+FFFD", "a\x00b", 0, kube.KeepHead, "a\uFFFDb"},
		{"a Latin-1 byte becomes U+FFFD", "caf\xe9", 0, kube.KeepHead, "caf\uFFFD"},
		{"a head cut never splits a character", "ab" + strings.Repeat("é", 4), 8, kube.KeepHead, "abé..."},
		{"a tail cut never splits a character", strings.Repeat("é", 4) + "z", 4, kube.KeepTail, "éz"},
		{"a short text is kept whole", "héllo", 6, kube.KeepHead, "héllo"},
	} {
		got := kube.PodText(c.in, c.n, c.cut)
		require.Equal(t, c.want, got, c.name)
		require.True(t, utf8.ValidString(got), c.name)
		if c.n > 0 {
			require.LessOrEqual(t, len(got), c.n, c.name)
		}
	}
}
