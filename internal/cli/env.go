package cli

import (
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// EnvFlag is one flag of `datajobs serve` with the environment variable that sets it
// (flagsFromEnv). The Helm chart exposes every one of them; its tests compare the chart
// with this list so that a new flag cannot be forgotten there.
type EnvFlag struct {
	// Name is the flag's name, without dashes in front.
	Name string
	// Env is DATAJOBS_<NAME_IN_UPPER_SNAKE>.
	Env string
	// Type is pflag's type name: string, int, int32, int64, float64, bool, duration,
	// stringSlice, or a custom one (throttle flags).
	Type string
	// Default is the default value as the flag prints it.
	Default string
	// Usage is the help text.
	Usage string
}

// envName is the environment variable of a flag.
func envName(flag string) string {
	return "DATAJOBS_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// ServeEnv lists every flag `datajobs serve` reads, the global ones included, sorted by name.
func ServeEnv() []EnvFlag {
	root := newRootCommand(io.Discard, io.Discard)
	serve, _, err := root.Find([]string{"serve"})
	if err != nil {
		panic("cli: no serve command: " + err.Error())
	}
	var out []EnvFlag
	add := func(f *pflag.Flag) {
		out = append(out, EnvFlag{Name: f.Name, Env: envName(f.Name), Type: f.Value.Type(), Default: f.DefValue, Usage: f.Usage})
	}
	serve.LocalFlags().VisitAll(add)
	serve.InheritedFlags().VisitAll(add)
	slices.SortFunc(out, func(a, b EnvFlag) int { return strings.Compare(a.Name, b.Name) })
	return out
}
