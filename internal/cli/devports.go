package cli

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// checkPortsFree fails, before anything is started, when an address `datajobs dev`
// serves on is taken, naming the process that holds it (when /proc tells).
func checkPortsFree(addrs ...string) error {
	var errs []error
	for _, addr := range addrs {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			l.Close()
			continue
		}
		msg := fmt.Sprintf("%s is in use", addr)
		if _, port, perr := net.SplitHostPort(addr); perr == nil {
			if p, _ := strconv.Atoi(port); p > 0 {
				if holder := portHolder(p); holder != "" {
					msg += " by " + holder
				}
			}
		}
		errs = append(errs, errors.New(msg))
	}
	if len(errs) > 0 {
		return fmt.Errorf("datajobs dev cannot serve: %w; stop that process or choose other addresses with --listen and --admin-listen (DATAJOBS_LISTEN, DATAJOBS_ADMIN_LISTEN)", errors.Join(errs...))
	}
	return nil
}

// portHolder names the process listening on TCP port ("pid 123 (datajobs dev)"), or ""
// when it cannot be found (another user's process, or no /proc).
func portHolder(port int) string {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// sl local_address rem_address st ... inode; st 0A is LISTEN.
			if len(fields) < 10 || fields[3] != "0A" {
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); ok && err == nil && int(p) == port {
				inodes["socket:["+fields[9]+"]"] = true
			}
		}
		f.Close()
	}
	if len(inodes) == 0 {
		return ""
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && inodes[target] {
			pid := strings.Split(fd, "/")[2]
			cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			args := strings.Join(strings.Fields(strings.ReplaceAll(string(cmdline), "\x00", " ")), " ")
			return fmt.Sprintf("pid %s (%s)", pid, args)
		}
	}
	return ""
}
