package cli

import (
	"fmt"
	"strconv"
)

// throttleFlag is --kube-qps or --kube-burst: "auto" (zero, decided at connect time by
// kube.Connect) or a number; a negative QPS disables the client-side limit.
type throttleFlag struct {
	qps   *float32
	burst *int
}

func (f *throttleFlag) String() string {
	switch {
	case f.qps != nil && *f.qps != 0:
		return strconv.FormatFloat(float64(*f.qps), 'g', -1, 32)
	case f.burst != nil && *f.burst != 0:
		return strconv.Itoa(*f.burst)
	}
	return "auto"
}

func (f *throttleFlag) Set(s string) error {
	if s == "auto" {
		if f.qps != nil {
			*f.qps = 0
		} else {
			*f.burst = 0
		}
		return nil
	}
	if f.qps != nil {
		v, err := strconv.ParseFloat(s, 32)
		if err != nil || v == 0 {
			return fmt.Errorf("%q: want auto, a positive number, or -1 for no limit", s)
		}
		*f.qps = float32(max(v, -1))
		return nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		return fmt.Errorf("%q: want auto or a positive number", s)
	}
	*f.burst = v
	return nil
}

func (f *throttleFlag) Type() string { return "auto|number" }
