package tracker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The tracker's keeps drop the entry put longest ago, and only past their bound: a
// newer state of a kept execution refreshes it (the bound counts executions, not states).
func TestAKeepEvictsTheOldestPastItsBoundOnly(t *testing.T) {
	t.Parallel()
	k := newKept[int](2)
	for _, key := range []string{"a", "b"} {
		_, evicted := k.put(key, 1)
		require.False(t, evicted)
	}
	_, evicted := k.put("a", 2) // a newer state of a: a is the newest now
	require.False(t, evicted)
	gone, evicted := k.put("c", 1)
	require.True(t, evicted)
	require.Equal(t, "b", gone)
	require.Equal(t, 2, k.len())
	v, ok := k.take("a")
	require.True(t, ok)
	require.Equal(t, 2, v)
	_, ok = k.get("a")
	require.False(t, ok)
	_, ok = k.take("b")
	require.False(t, ok, "evicted")
	require.Equal(t, 1, k.len())
}
