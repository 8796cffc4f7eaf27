package devenv

import (
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two environments' real nodes at once (test binaries and sessions run side by side) must
// not share a bridge or a subnet: their hashes here point at the same first /24 (a 1 in
// 254 chance between two real state folders), set up at the same moment. Each removes only
// its own bridge, and a bridge whose environment was killed (its state folder's lock is
// free) is removed by the next node's start, so that killed runs do not use up the range.
func TestTwoNodeNetworksAtOnceGetTheirOwnBridgeAndSubnetAndAKilledOnesIsSwept(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a bridge needs root, as the real node does")
	}
	t.Parallel()
	hashes := []string{"ee00000000a1", "ee00000000a2"}
	dirs := []string{t.TempDir(), t.TempDir()}
	locks := make([]*os.File, 2)
	nets := make([]nodeNet, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		var err error
		locks[i], err = lockStateDir(dirs[i])
		require.NoError(t, err)
		wg.Go(func() { nets[i], errs[i] = setUpNodeNet(dirs[i], hashes[i]) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, n := range nets {
			assert.NoError(t, n.remove())
		}
	})
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	assert.NotEqual(t, nets[0].bridge, nets[1].bridge)
	assert.NotEqual(t, nets[0].subnet.String(), nets[1].subnet.String(), "the second took the next free /24")
	for _, n := range nets {
		assert.Equal(t, []string{n.gateway.String() + "/24"}, linkAddrs(t, n.bridge), "the gateway is the bridge's address on the host")
	}

	// The first environment is killed: its lock is gone, its bridge is left behind. A
	// process forked meanwhile by a parallel test holds the lock's file until it execs (a
	// flock lives while any copy of its descriptor does): make test at 08cf470 swept
	// while one did, kept the bridge and gave the third the next subnet. A killed
	// environment's lock is gone once its process is, so the sweep waits for that here.
	require.NoError(t, locks[0].Close())
	require.Eventually(t, func() bool { return !stateDirInUse(dirs[0]) }, 10*time.Second, 10*time.Millisecond, "the killed environment's lock released")
	third := t.TempDir()
	lock, err := lockStateDir(third)
	require.NoError(t, err)
	defer lock.Close()
	n, err := setUpNodeNet(third, "ee00000000a3")
	require.NoError(t, err)
	assert.False(t, linkExists(nets[0].bridge), "the killed environment's bridge was removed")
	assert.True(t, linkExists(nets[1].bridge), "the running environment's bridge was kept")
	assert.Equal(t, nets[0].subnet.String(), n.subnet.String(), "its subnet is free again")
	require.NoError(t, n.remove())
	assert.False(t, linkExists(n.bridge), "remove deletes the bridge")
	require.NoError(t, locks[1].Close())
}

func linkAddrs(t *testing.T, name string) []string {
	t.Helper()
	l, err := net.InterfaceByName(name)
	require.NoError(t, err)
	addrs, err := l.Addrs()
	require.NoError(t, err)
	var v4 []string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			v4 = append(v4, a.String())
		}
	}
	return v4
}
